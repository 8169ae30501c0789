#!/usr/bin/env node
// Helper for contracts/build.sh (run that, not this).
//
//   node compile.js input               print the solc standard-JSON input for *.sol here
//   node compile.js output RAW OUTDIR   read solcjs --standard-json stdout from RAW, fail on
//                                       compiler errors, write the artifacts into OUTDIR
//
// The solc call itself is left to build.sh so that any solcjs (SOLCJS, .ci/node, npx) works.
'use strict';

const fs = require('fs');
const path = require('path');

const HERE = __dirname;
// Order is fixed: it is the order of the sources in the input and of selectors.json.
const CONTRACTS = ['SmartAccount', 'TestExchange'];

function die(msg) {
  process.stderr.write(`compile.js: ${msg}\n`);
  process.exit(1);
}

function standardJsonInput() {
  const sources = {};
  for (const name of CONTRACTS) {
    const file = `${name}.sol`;
    // Source unit names are bare file names and line endings are normalized, so the metadata
    // hash embedded in the bytecode does not depend on where or how the repo is checked out.
    const content = fs.readFileSync(path.join(HERE, file), 'utf8').replace(/\r\n/g, '\n');
    sources[file] = { content };
  }
  return {
    language: 'Solidity',
    sources,
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: 'shanghai',
      outputSelection: {
        '*': { '*': ['abi', 'evm.bytecode.object', 'evm.methodIdentifiers'] },
      },
    },
  };
}

function parseSolcOutput(raw) {
  // solcjs prints notes such as ">>> Cannot retry compilation with SMT ..." on stdout before
  // the JSON document; the document is the first line that starts with '{'.
  const lines = raw.split('\n');
  const start = lines.findIndex((line) => line.startsWith('{'));
  if (start < 0) die(`no JSON in the compiler output:\n${raw}`);
  try {
    return JSON.parse(lines.slice(start).join('\n'));
  } catch (e) {
    die(`cannot parse the compiler output: ${e.message}`);
  }
}

function sortedObject(obj) {
  const out = {};
  for (const key of Object.keys(obj).sort()) out[key] = obj[key];
  return out;
}

function writeArtifacts(rawFile, outDir) {
  const output = parseSolcOutput(fs.readFileSync(rawFile, 'utf8'));
  let failed = false;
  for (const err of output.errors || []) {
    const text = (err.formattedMessage || err.message || JSON.stringify(err)).trimEnd();
    process.stderr.write(`${text}\n`);
    if (err.severity === 'error' || err.type === 'Error') failed = true;
  }
  if (failed) die('compilation failed');

  fs.mkdirSync(outDir, { recursive: true });
  const selectors = {};
  for (const name of CONTRACTS) {
    const unit = (output.contracts || {})[`${name}.sol`] || {};
    const contract = unit[name];
    if (!contract) die(`no output for ${name}.sol:${name}`);
    const bin = contract.evm.bytecode.object;
    if (!/^[0-9a-f]+$/.test(bin)) die(`${name}: unexpected bytecode (unlinked library?)`);
    // Creation bytecode, lower-case hex, no 0x prefix, exactly one trailing newline.
    fs.writeFileSync(path.join(outDir, `${name}.bin`), `${bin}\n`);
    fs.writeFileSync(
      path.join(outDir, `${name}.abi.json`),
      `${JSON.stringify(contract.abi, null, 2)}\n`,
    );
    selectors[name] = sortedObject(contract.evm.methodIdentifiers);
  }
  fs.writeFileSync(path.join(outDir, 'selectors.json'), `${JSON.stringify(selectors, null, 2)}\n`);
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'input' && args.length === 0) {
  process.stdout.write(`${JSON.stringify(standardJsonInput(), null, 2)}\n`);
} else if (mode === 'output' && args.length === 2) {
  writeArtifacts(args[0], args[1]);
} else {
  die('usage: node compile.js input | node compile.js output RAW_SOLC_STDOUT OUTDIR');
}
