#!/usr/bin/env node
// ONNX Runtime peer of `cuttle bench --model FILE.onnx --mode infer`: the
// same options and JSON fields, so that bench/compare --onnx can put the two
// side by side on the same file.
//
//   node bench/peers/ort_bench.js --model resnet18.onnx --batch 16 --threads 2 \
//       --steps 20 --warmup 3 --json
//
// A step is one InferenceSession.run on a batch of seeded values in [-1, 1)
// made once (the model's input shape, --batch in place of a symbolic first
// dimension); the statistics use cuttle's quantile rule.  ONNX Runtime runs on
// the CPU with --threads intra-op threads (0: its own choice, every core),
// sequential execution, every graph optimization (--optimization to change).
// Inference only: --mode train and other devices are refused with exit status
// 2.  The work is tests/onnx/ort_run.js's --bench; ONNX Runtime comes from
// scripts/setup-onnxruntime.sh.  Exit status: 0, 1 a failure, 2 a bad option.
'use strict';
const path = require('path');
const ortRun = require(path.join(__dirname, '..', '..', 'tests', 'onnx', 'ort_run.js'));

const DEFAULTS = { model: '', batch: 64, threads: 0, steps: 50, warmup: 5, mode: 'infer',
                   device: 'cpu', input: '', optimization: 'all', json: false };

function parse(argv) {
    const args = Object.assign({}, DEFAULTS);
    const numbers = { batch: 1, threads: 0, steps: 1, warmup: 0 };
    for (let i = 0; i < argv.length; i++) {
        const name = argv[i].replace(/^--/, '');
        if (argv[i] === '--json') {
            args.json = true;
        } else if (argv[i].startsWith('--') && name in args && i + 1 < argv.length) {
            const value = argv[++i];
            if (name in numbers) {
                const v = Number(value);
                if (!Number.isInteger(v) || v < numbers[name])
                    ortRun.fail(`--${name} expects a whole number of at least ${numbers[name]}, ` +
                                `got '${value}'`, 2);
                args[name] = v;
            } else {
                args[name] = value;
            }
        } else {
            ortRun.fail(`unknown option or missing value: ${argv[i]}`, 2);
        }
    }
    if (!args.model.endsWith('.onnx'))
        ortRun.fail('--model FILE.onnx is required (ONNX Runtime runs .onnx files only)', 2);
    if (args.mode !== 'infer')
        ortRun.fail(`--mode ${args.mode}: the ONNX Runtime peer times inference only`, 2);
    if (args.device !== 'cpu' && !/^cpu:\d+$/.test(args.device))
        ortRun.fail(`--device ${args.device}: the ONNX Runtime peer runs on the CPU only`, 2);
    if (args.device.startsWith('cpu:'))
        args.threads = Number(args.device.slice(4));
    return args;
}

async function main() {
    const args = parse(process.argv.slice(2));
    const ort = ortRun.loadOrt();
    const run = { positional: [args.model], threads: args.threads, bench: args.steps,
                  warmup: args.warmup, optimization: args.optimization };
    const session = await ortRun.openSession(ort, run);
    const input = ortRun.syntheticInput(session.inputMetadata[0], args.batch);
    const takes = input.shape.slice(1).join('x');
    if (args.input && takes !== args.input)
        ortRun.fail(`--input ${args.input}: ${args.model} takes ${takes}`, 2);
    const result = await ortRun.bench(ort, session, run, input);
    if (args.json) {
        console.log(JSON.stringify(result));
        return;
    }
    console.log(`bench ${args.model} infer, batch ${result.batch}, input ${result.input}, ` +
                `on ${result.backend}, ${result.threads} threads`);
    console.log(`  ${result.steps} steps after ${result.warmup} warm-up: median ` +
                `${result.median_ms.toFixed(3)} ms  (p10 ${result.p10_ms.toFixed(3)}, ` +
                `p90 ${result.p90_ms.toFixed(3)}, min ${result.min_ms.toFixed(3)}, ` +
                `max ${result.max_ms.toFixed(3)})`);
    console.log(`  ${result.images_per_second.toFixed(1)} images/s`);
}

main().catch(e => ortRun.fail(e.stack || String(e)));
