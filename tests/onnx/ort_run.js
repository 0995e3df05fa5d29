#!/usr/bin/env node
// ONNX Runtime (CPU) on an .onnx file, the reference that the ONNX tests and
// bench/compare --onnx hold cuttle against.
//
//   node tests/onnx/ort_run.js MODEL.onnx INPUT.npy OUTPUT.npy [--threads N]
//       runs the model's single input on INPUT.npy (float32, C order, as
//       numpy.save writes it) and writes its first output as float32 .npy
//   node tests/onnx/ort_run.js MODEL.onnx [INPUT.npy] --bench STEPS
//       [--warmup W] [--batch B] [--threads N]
//       times STEPS runs after W untimed ones (default 5) and prints one JSON
//       line with the fields of `cuttle bench --json` that apply (median_ms,
//       p10_ms, ..., images_per_second = batch / median) and every step's
//       time (step_ms).  Without INPUT.npy the input is seeded random values
//       in [-1, 1) of the model's input shape, batch B (default 1) in place
//       of a symbolic first dimension.
//
// --threads N: ONNX Runtime's intra-op threads (0, the default: its own
// choice, every core); inter-op parallelism stays off (sequential mode).
// --optimization LEVEL: disabled, basic, extended or all (the default).
// ONNX Runtime comes from the npm package onnxruntime-node, which
// scripts/setup-onnxruntime.sh installs into .deps/onnxruntime/ (or
// $ONNXRUNTIME_NODE_MODULES).  Exit status: 0 success, 1 a failure (no ONNX
// Runtime: the message says how to install it), 2 a bad command line.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

const ROOT = path.resolve(__dirname, '..', '..');
const NPY_MAGIC = '\x93NUMPY';
const NPY_ALIGN = 64;
const DEFAULT_WARMUP = 5;

const PROGRAM = path.basename(require.main ? require.main.filename : 'ort_run.js', '.js');

function fail(message, status = 1) {
    process.stderr.write(`${PROGRAM}: ${message}\n`);
    process.exit(status);
}

function loadOrt() {
    const dir = process.env.ONNXRUNTIME_NODE_MODULES ||
        path.join(ROOT, '.deps', 'onnxruntime', 'node_modules');
    try {
        return require(path.join(dir, 'onnxruntime-node'));
    } catch (e) {
        fail(`cannot load onnxruntime-node from ${dir} (${e.message.split('\n')[0]}): ` +
             'run scripts/setup-onnxruntime.sh');
    }
}

// A float32 C-order .npy (format 1.0, 2.0 or 3.0) as {shape, data}.
function readNpy(file) {
    const bytes = fs.readFileSync(file);
    if (bytes.toString('latin1', 0, 6) !== NPY_MAGIC)
        fail(`${file} is not a .npy file (no \\x93NUMPY magic)`);
    const major = bytes[6];
    const headerLength = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
    const start = major === 1 ? 10 : 12;
    const header = bytes.toString('latin1', start, start + headerLength);
    const descr = /'descr':\s*'([^']*)'/.exec(header);
    const fortran = /'fortran_order':\s*(True|False)/.exec(header);
    const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
    if (!descr || !fortran || !shape)
        fail(`${file}: cannot read the .npy header ${JSON.stringify(header)}`);
    if (descr[1] !== '<f4' || fortran[1] !== 'False')
        fail(`${file} holds ${descr[1]}${fortran[1] === 'True' ? ' in Fortran order' : ''}; ` +
             'expected float32 (<f4) in C order: numpy.save(f, x.astype(numpy.float32))');
    const dims = shape[1].split(',').map(s => s.trim()).filter(s => s).map(Number);
    const count = dims.reduce((a, b) => a * b, 1);
    const offset = start + headerLength;
    if (bytes.length - offset !== 4 * count)
        fail(`${file}: shape (${dims}) needs ${4 * count} bytes of data, ` +
             `found ${bytes.length - offset}`);
    const data = new Float32Array(count);
    for (let i = 0; i < count; i++)
        data[i] = bytes.readFloatLE(offset + 4 * i);
    return { shape: dims, data };
}

function writeNpy(file, shape, data) {
    const dims = shape.length === 1 ? `${shape[0]},` : shape.join(', ');
    let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims}), }`;
    header += ' '.repeat((NPY_ALIGN - ((10 + header.length + 1) % NPY_ALIGN)) % NPY_ALIGN) + '\n';
    const out = Buffer.alloc(10 + header.length + 4 * data.length);
    out.write(NPY_MAGIC, 0, 'latin1');
    out[6] = 1;
    out[7] = 0;
    out.writeUInt16LE(header.length, 8);
    out.write(header, 10, 'latin1');
    for (let i = 0; i < data.length; i++)
        out.writeFloatLE(data[i], 10 + header.length + 4 * i);
    fs.writeFileSync(file, out);
}

function parseArgs(argv) {
    const args = { positional: [], threads: 0, bench: 0, warmup: DEFAULT_WARMUP, batch: 1,
                   optimization: 'all' };
    const numbers = { '--threads': 0, '--bench': 1, '--warmup': 0, '--batch': 1 };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a in numbers) {
            const v = Number(argv[++i]);
            if (!Number.isInteger(v) || v < numbers[a])
                fail(`${a} expects a whole number of at least ${numbers[a]}, got '${argv[i]}'`, 2);
            args[a.slice(2)] = v;
        } else if (a === '--optimization') {
            args.optimization = argv[++i];
            if (!['disabled', 'basic', 'extended', 'all'].includes(args.optimization))
                fail(`--optimization expects disabled, basic, extended or all`, 2);
        } else if (a.startsWith('--')) {
            fail(`unknown option ${a}`, 2);
        } else {
            args.positional.push(a);
        }
    }
    const n = args.positional.length;
    if (args.bench ? n < 1 || n > 2 : n !== 3)
        fail('usage: ort_run.js MODEL.onnx INPUT.npy OUTPUT.npy [--threads N] | ' +
             'MODEL.onnx [INPUT.npy] --bench STEPS [--warmup W] [--batch B] [--threads N]', 2);
    return args;
}

// Seeded uniform values in [-1, 1) (a 32-bit LCG: reproducible, not random).
function syntheticInput(meta, batch) {
    if (!meta.isTensor || !meta.shape.length)
        fail(`the model's input ${meta.name} has no known shape: give an INPUT.npy`);
    const symbolic = (d, i) => fail(`the input's dimension ${i} (${d}) is symbolic: ` +
                                    'give an INPUT.npy');
    const shape = meta.shape.map((d, i) => (typeof d === 'number' && d > 0 ? d :
        i === 0 ? batch : symbolic(d, i)));
    if (shape[0] !== batch)
        fail(`the model's batch is fixed at ${shape[0]}; --batch ${batch} does not fit`, 2);
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    let state = 1;
    for (let i = 0; i < data.length; i++) {
        state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
        data[i] = state / 2147483648 - 1;
    }
    return { shape, data };
}

function quantile(sorted, q) { // numpy's default (linear), as cuttle bench
    const position = q * (sorted.length - 1);
    const below = Math.floor(position);
    if (below >= sorted.length - 1)
        return sorted[sorted.length - 1];
    return sorted[below] + (position - below) * (sorted[below + 1] - sorted[below]);
}

// Times args.bench runs after args.warmup untimed ones; the result object
// has cuttle bench's fields that apply, and every step's time (step_ms).
async function bench(ort, session, args, input) {
    const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', input.data, input.shape) };
    const times = [];
    for (let step = 0; step < args.warmup + args.bench; step++) {
        const start = process.hrtime.bigint();
        await session.run(feeds);
        const ms = Number(process.hrtime.bigint() - start) / 1e6;
        if (step >= args.warmup)
            times.push(ms);
    }
    const sorted = times.slice().sort((a, b) => a - b);
    const median = quantile(sorted, 0.5);
    const round = v => Math.round(v * 1e4) / 1e4;
    return {
        framework: `onnxruntime ${ort.env.versions ? ort.env.versions.common : ''}`.trim(),
        model: args.positional[0], batch: input.shape[0], input: input.shape.slice(1).join('x'),
        device: 'cpu', backend: `onnxruntime cpu, optimization ${args.optimization}`,
        mode: 'infer', steps: args.bench, warmup: args.warmup,
        median_ms: round(median), p10_ms: round(quantile(sorted, 0.1)),
        p90_ms: round(quantile(sorted, 0.9)), min_ms: round(sorted[0]),
        max_ms: round(sorted[sorted.length - 1]),
        mean_ms: round(times.reduce((a, b) => a + b, 0) / times.length),
        images_per_second: Math.round(input.shape[0] / (median / 1e3) * 10) / 10,
        peak_host_bytes: process.resourceUsage().maxRSS * 1024,
        threads: args.threads || os.cpus().length, step_ms: times.map(round),
    };
}

// A session on args.positional[0] with the options of args (threads, optimization).
async function openSession(ort, args) {
    const options = { executionProviders: ['cpu'], executionMode: 'sequential',
                      graphOptimizationLevel: args.optimization, interOpNumThreads: 1 };
    if (args.threads)
        options.intraOpNumThreads = args.threads;
    try {
        return await ort.InferenceSession.create(args.positional[0], options);
    } catch (e) {
        fail(`ONNX Runtime cannot load ${args.positional[0]}: ${e.message}`);
    }
}

async function main() {
    const args = parseArgs(process.argv.slice(2));
    const ort = loadOrt();
    const session = await openSession(ort, args);
    if (session.inputNames.length !== 1)
        fail(`${args.positional[0]} has ${session.inputNames.length} inputs ` +
             `(${session.inputNames.join(', ')}); expected one`);
    const input = args.positional.length > 1 ? readNpy(args.positional[1]) :
        syntheticInput(session.inputMetadata[0], args.batch);
    if (args.bench) {
        console.log(JSON.stringify(await bench(ort, session, args, input)));
        return;
    }
    const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', input.data, input.shape) };
    let results;
    try {
        results = await session.run(feeds);
    } catch (e) {
        fail(`ONNX Runtime failed on ${args.positional[0]}: ${e.message}`);
    }
    const output = results[session.outputNames[0]];
    if (output.type !== 'float32')
        fail(`the first output ${session.outputNames[0]} is ${output.type}, not float32`);
    writeNpy(args.positional[2], output.dims, output.data);
}

module.exports = { fail, loadOrt, openSession, readNpy, writeNpy, syntheticInput, bench,
                   DEFAULT_WARMUP };
if (require.main === module)
    main().catch(e => fail(e.stack || String(e)));
