// ONNX Runtime's CPU build (npm onnxruntime-node, installed with
// --ignore-scripts) on one model, for bench/compare_onnx_networks.py:
//   node bench/ort_run.js model.onnx x.npy runs threads out.bin
// prints "median <ms>" and writes the first output as raw float32.
const fs = require("fs");
const ort = require("onnxruntime-node");

function readNpy(path) {
  const buf = fs.readFileSync(path);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString("latin1", 10, 10 + headerLen);
  if (!header.includes("'<f4'")) throw new Error(path + ": not little-endian float32");
  const shape = header.match(/'shape': \(([^)]*)\)/)[1].split(",").filter((s) => s.trim()).map(Number);
  const start = 10 + headerLen;
  const data = new Float32Array(buf.buffer.slice(buf.byteOffset + start, buf.byteOffset + buf.length));
  return { shape, data };
}

async function main() {
  const [model, input, runs, threads, out] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, graphOptimizationLevel: "all" });
  const x = readNpy(input);
  const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", x.data, x.shape) };
  let result;
  for (let i = 0; i < 3; ++i) result = await session.run(feeds);
  const times = [];
  for (let i = 0; i < Number(runs); ++i) {
    const t = process.hrtime.bigint();
    result = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  console.log("median " + times[Math.floor(times.length / 2)].toFixed(3));
  const y = result[session.outputNames[0]].data;
  fs.writeFileSync(out, Buffer.from(y.buffer, y.byteOffset, y.byteLength));
}
main().catch((e) => { console.error(e.message); process.exit(1); });
