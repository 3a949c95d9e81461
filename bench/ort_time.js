// ONNX Runtime (CPU) latency of an .onnx model whose one input is named "x": one cold run, then N timed
// runs. Prints {"first_ms", "best_ms", "median_ms"}. Used by bench/infer_vs_peers.py.
//   NODE_PATH=DIR/node_modules node bench/ort_time.js MODEL.onnx 1,3,224,224 REPEAT THREADS
const ort = require('onnxruntime-node');

async function main() {
  const [file, shapeText, repeat, threads] = process.argv.slice(2);
  const shape = shapeText.split(',').map(Number);
  const session = await ort.InferenceSession.create(file, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const count = shape.reduce((a, b) => a * b, 1);
  const x = new ort.Tensor('float32', Float32Array.from({length: count}, () => Math.random() - 0.5), shape);
  const times = [];
  for (let i = 0; i <= Number(repeat); i++) {
    const start = process.hrtime.bigint();
    await session.run({x});
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  const first = times.shift();
  times.sort((a, b) => a - b);
  console.log(JSON.stringify({first_ms: first, best_ms: times[0], median_ms: times[Math.floor(times.length / 2)]}));
}
main().catch((e) => {
  console.error(e.message);
  process.exit(1);
});
