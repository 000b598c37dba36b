// The H200's rate for the warp-level tensor-core instruction (mma.sync,
// HMMA in SASS), multiplying f16 fragments held in registers into f32
// accumulators: no memory, no shared memory, no barriers. Set next to
// bench/half/make_ceiling.py's cooperative-matrix kernels (the same work
// through Vulkan) and cuBLAS (Hopper's warpgroup instruction, wgmma), it
// says which instruction the driver gives cooperative matrices.
//
//   nvcc -O3 -arch=sm_90 bench/half/hmma_peak.cu -o hmma_peak && ./hmma_peak
#include <cstdio>
#include <cuda_runtime.h>

template <int Chains>
__global__ void hmmaLoop(float *out, int iterations) {
  // Fragments near 1.0 that the compiler cannot fold.
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i)
    a[i] = 0x3c003c00u ^ (threadIdx.x & 3u & i);
  for (int i = 0; i < 2; ++i)
    b[i] = 0x3c003c00u ^ (threadIdx.x & 1u & i);
  float acc[Chains][4] = {};
  for (int it = 0; it < iterations; ++it) {
#pragma unroll
    for (int j = 0; j < Chains; ++j)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                   "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                   : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float sum = 0;
  for (int j = 0; j < Chains; ++j)
    sum += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

template <int Chains>
void measure(int sms, int warpsPerBlock, int blocksPerSm) {
  int blocks = sms * blocksPerSm, threads = 32 * warpsPerBlock, iterations = 8192;
  float *out;
  cudaMalloc(&out, sizeof(float) * blocks * threads);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  hmmaLoop<Chains><<<blocks, threads>>>(out, 64);
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(start);
    hmmaLoop<Chains><<<blocks, threads>>>(out, iterations);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms;
    cudaEventElapsedTime(&ms, start, stop);
    best = ms < best ? ms : best;
  }
  double flop = 2.0 * 16 * 8 * 16 * Chains * double(iterations) * blocks * warpsPerBlock;
  std::printf("mma.sync m16n8k16 f16->f32: %d chains per warp, %d warps x %d blocks per SM: "
              "%.3f ms, %.1f TFLOP/s (%s)\n",
              Chains, warpsPerBlock, blocksPerSm, best, flop / (best * 1e-3) / 1e12,
              cudaGetErrorString(cudaGetLastError()));
  cudaFree(out);
}

int main() {
  cudaDeviceProp props;
  cudaGetDeviceProperties(&props, 0);
  std::printf("%s, %d SMs\n", props.name, props.multiProcessorCount);
  int sms = props.multiProcessorCount;
  measure<4>(sms, 4, 2);
  measure<8>(sms, 4, 2);
  measure<8>(sms, 4, 4);
  measure<16>(sms, 4, 2);
  measure<16>(sms, 8, 2);
  return 0;
}
