// ONNX Runtime's own profile of one model (npm onnxruntime-node, CPU):
//   node bench/ort_profile.js model.onnx x.npy runs threads
// runs it `runs` times after 3 warm-ups with ORT's profiler on, and prints
// per node (as ORT ran it, after its graph optimizations): op type, name,
// output shape and median microseconds, then the median total per run.
// bench/compare_depthwise.py reads it to time ORT's kernels inside a network.
const fs = require("fs");
const path = require("path");
const ort = require("onnxruntime-node");

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString("latin1", 10, 10 + headerLen);
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(",").filter((s) => s.trim()).map(Number);
  const start = 10 + headerLen;
  return { shape, data: new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length)) };
}

async function main() {
  const [model, input, runs, threads] = process.argv.slice(2);
  const dir = fs.mkdtempSync("/tmp/ort-profile-");
  const cwd = process.cwd();
  process.chdir(dir);
  const session = await ort.InferenceSession.create(path.resolve(cwd, model), {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: "all",
    enableProfiling: true, profileFilePrefix: "ort" });
  const x = readNpy(path.resolve(cwd, input));
  const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", x.data, x.shape) };
  for (let i = 0; i < 3 + Number(runs); ++i) await session.run(feeds);
  session.endProfiling();
  const file = fs.readdirSync(dir).find((f) => f.startsWith("ort") && f.endsWith(".json"));
  const events = JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));
  const nodes = new Map(); // name -> {op, shape, durations}
  const totals = [];
  for (const e of events) {
    if (e.cat === "Session" && e.name === "model_run") totals.push(e.dur);
    if (e.cat !== "Node" || !e.name.endsWith("_kernel_time")) continue;
    const name = e.name.slice(0, -"_kernel_time".length);
    if (!nodes.has(name)) {
      const out = (e.args.output_type_shape || []).map((o) => Object.values(o)[0]);
      nodes.set(name, { op: e.args.op_name, shape: JSON.stringify(out[0] || []), d: [] });
    }
    nodes.get(name).d.push(e.dur);
  }
  const median = (a) => a.slice().sort((p, q) => p - q)[Math.floor(a.length / 2)];
  for (const [name, n] of nodes)
    console.log(`${n.op}\t${name}\t${n.shape}\t${median(n.d.slice(3))}`);
  console.log(`total\t-\t-\t${median(totals.slice(3))}`);
  fs.rmSync(dir, { recursive: true });
}
main().catch((e) => { console.error(e.message); process.exit(1); });
