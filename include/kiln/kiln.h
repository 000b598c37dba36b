//===- kiln.h - the whole public API ----------------------------*- C++ -*-===//

#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/Device.h"
#include "kiln/Errors.h"
#include "kiln/NetworkOps.h"
#include "kiln/Profile.h"
#include "kiln/Program.h"
#include "kiln/Stats.h"
#include "kiln/Tensor.h"
#include "kiln/Tune.h"

#endif // KILN_KILN_H
