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
// Where build.sh's solcjs finds imported packages (installed by .ci/install-chain-tools.sh).
const NODE_MODULES = path.join(HERE, '..', '.ci', 'node', 'node_modules');
// Order is fixed: it is the order of the sources in the input and of selectors.json. Ours are
// source units named by their file here; EntryPoint v0.7 is compiled from its npm package
// (`@account-abstraction/contracts` 0.7.0), under its package path.
const CONTRACTS = [
  { name: 'SmartAccount', unit: 'SmartAccount.sol', file: path.join(HERE, 'SmartAccount.sol') },
  { name: 'TestExchange', unit: 'TestExchange.sol', file: path.join(HERE, 'TestExchange.sol') },
  { name: 'TestCollateral', unit: 'TestExchange.sol', file: path.join(HERE, 'TestExchange.sol') },
  {
    name: 'EntryPoint',
    unit: '@account-abstraction/contracts/core/EntryPoint.sol',
    file: path.join(NODE_MODULES, '@account-abstraction/contracts/core/EntryPoint.sol'),
  },
];

function die(msg) {
  process.stderr.write(`compile.js: ${msg}\n`);
  process.exit(1);
}

function standardJsonInput() {
  const sources = {};
  for (const { unit, file } of CONTRACTS) {
    if (sources[unit]) continue;
    // Source unit names do not name a directory of this machine and line endings are
    // normalized, so the metadata hash embedded in the bytecode does not depend on where or
    // how the repo is checked out. Imports are found by solcjs under NODE_MODULES.
    if (!fs.existsSync(file)) die(`${file} is missing (run: bash .ci/install-chain-tools.sh)`);
    const content = fs.readFileSync(file, 'utf8').replace(/\r\n/g, '\n');
    sources[unit] = { content };
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
  for (const { name, unit: unitName } of CONTRACTS) {
    const unit = (output.contracts || {})[unitName] || {};
    const contract = unit[name];
    if (!contract) die(`no output for ${unitName}:${name}`);
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
