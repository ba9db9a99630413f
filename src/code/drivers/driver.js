// sandbox-host's code driver for JavaScript (src/code/drivers/driver.js), run inside a sandbox
// as   node -e <this text> <cwd> <result_max>
// Cells come on fd 0 ("<decimal length>\n" then that many bytes of code), the cell's output
// goes to fds 1 and 2, frames go to fd 3, one JSON object a line (sh/codeframe.h): ready or
// fail once, then per cell zero or more result, at most one error, exactly one done.
// The cells run in one vm context whose globals last from cell to cell; the completion value
// (not undefined) is util.inspect'ed; a Promise value is awaited first (the event loop runs
// only then: between cells the driver blocks in its read, so a cell's timers and I/O callbacks
// run while a later cell awaits). Top-level await is not supported (a script, not a module).
// fd hygiene, best effort (node has no dup): the cells' pipe is reopened through
// /proc/self/fd/0 (libuv opens every file close-on-exec) and /dev/null put on fd 0, and fd 3
// likewise; where the sandbox's uid may not open the pipe's inode (a pipe made by the daemon
// is its owner's, mode 0600) they stay where they are, process.stdin reads as empty, and only
// a child spawned with stdio 'inherit' (or the cell's own fs calls on fd 0) could read cells.
(function () {
  'use strict';
  const fs = require('fs');
  const vm = require('vm');
  const util = require('util');
  const path = require('path');
  const Module = require('module');
  const stringify = JSON.stringify;
  const ERROR_LINE_MAX = 60000;

  let frames = 3;
  let cells = 0;
  const argv = process.argv.slice(1);
  const cwd = argv[0] || '';
  let resultMax = argv.length > 1 ? Number(argv[1]) : 8 * 1024 * 1024;

  const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

  // Text any JSON decoder takes whole: no NUL, no lone surrogate.
  function clean(s) {
    s = String(s);
    return s.replace(/\0|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
                     '\ufffd');
  }

  function frameLine(obj) {
    return Buffer.from(stringify(obj) + '\n', 'utf8');
  }

  function writeFrame(obj) {
    const b = frameLine(obj);
    let off = 0;
    while (off < b.length) {
      try {
        off += fs.writeSync(frames, b, off, b.length - off);
      } catch (e) {
        if (e.code === 'EAGAIN' || e.code === 'EINTR') {
          sleep(5);
          continue;
        }
        process.reallyExit(1); // the daemon is gone or the cell closed fd 3
      }
    }
  }

  function readSome(buf, off, n) {
    for (;;) {
      try {
        return fs.readSync(cells, buf, off, n, null);
      } catch (e) {
        if (e.code === 'EAGAIN' || e.code === 'EINTR') {
          sleep(5);
          continue;
        }
        if (e.code === 'EOF') return 0;
        throw e;
      }
    }
  }

  // The next cell's code, or null at the end of the pipe.
  function readCell() {
    const one = Buffer.alloc(1);
    let digits = '';
    for (;;) {
      if (readSome(one, 0, 1) === 0) {
        if (digits) process.reallyExit(2);
        return null;
      }
      const c = one[0];
      if (c === 10) break;
      if (c < 48 || c > 57 || digits.length >= 20) process.reallyExit(2);
      digits += String.fromCharCode(c);
    }
    if (!digits) process.reallyExit(2);
    const n = Number(digits);
    if (!Number.isSafeInteger(n)) process.reallyExit(2);
    const buf = Buffer.alloc(n);
    let off = 0;
    while (off < n) {
      const k = readSome(buf, off, n - off);
      if (k === 0) process.reallyExit(2);
      off += k;
    }
    return buf.toString('utf8');
  }

  // An fd moved to a close-on-exec one of its own (see the top): the new fd, or the old one.
  function reopen(fd, flags) {
    try {
      return fs.openSync('/proc/self/fd/' + fd, flags);
    } catch (e) {
      return fd;
    }
  }

  function failAndExit(msg) {
    writeFrame({t: 'fail', msg: clean(msg).slice(0, 2000)});
    process.reallyExit(1);
  }

  // ---- start-up --------------------------------------------------------------------------

  process.on('SIGINT', () => {}); // an interrupt between cells is nothing
  process.on('uncaughtException', (e) => {
    // A callback of an earlier cell's threw while a cell awaited: the output of that cell.
    try {
      process.stderr.write('Uncaught ' + util.inspect(e) + '\n');
    } catch (e2) { /* nothing to do */ }
  });
  process.on('unhandledRejection', (e) => {
    try {
      process.stderr.write('Unhandled rejection: ' + util.inspect(e) + '\n');
    } catch (e2) { /* nothing to do */ }
  });
  if (!Number.isSafeInteger(resultMax) || resultMax <= 0) failAndExit('bad result_max');
  const f3 = reopen(3, fs.constants.O_WRONLY);
  if (f3 !== 3) {
    frames = f3;
    fs.closeSync(3);
  }
  cells = reopen(0, fs.constants.O_RDONLY);
  if (cells !== 0) {
    fs.closeSync(0);
    fs.openSync('/dev/null', 'r'); // the lowest free fd: 0
  }
  try {
    const empty = new (require('stream').Readable)({read() { this.push(null); }});
    Object.defineProperty(process, 'stdin', {get: () => empty, configurable: true});
  } catch (e) { /* process.stdin stays node's */ }
  if (cwd) {
    try {
      process.chdir(cwd);
    } catch (e) {
      failAndExit("cwd '" + cwd + "': " + (e.code || e.message));
    }
  }
  const here = process.cwd();
  process.argv = [process.argv[0]];

  const sandbox = {};
  for (const k of ['console', 'process', 'Buffer', 'setTimeout', 'clearTimeout', 'setInterval',
                   'clearInterval', 'setImmediate', 'clearImmediate', 'queueMicrotask',
                   'structuredClone', 'URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder',
                   'AbortController', 'AbortSignal', 'EventTarget', 'Event', 'fetch', 'Headers',
                   'Request', 'Response', 'FormData', 'Blob', 'performance', 'atob', 'btoa',
                   'crypto', 'BroadcastChannel', 'MessageChannel']) {
    if (k in globalThis) sandbox[k] = globalThis[k];
  }
  const req = Module.createRequire(path.join(here, '[cell]'));
  sandbox.require = req;
  sandbox.module = {exports: {}, require: req};
  sandbox.exports = sandbox.module.exports;
  sandbox.__filename = path.join(here, '[cell]');
  sandbox.__dirname = here;
  const context = vm.createContext(sandbox);
  vm.runInContext('globalThis.global = globalThis;', context);

  // ---- a cell ----------------------------------------------------------------------------

  // The bundle within result_max bytes of its frame's line (text/plain cut if needed).
  function bounded(text) {
    const budget = resultMax - frameLine({t: 'result', data: {}}).length;
    const size = (v) => frameLine({'text/plain': v}).length - 3;
    if (size(text) <= budget) return {'text/plain': text};
    const note = '\n[... cut: over SANDBOX_HOST_CODE_RESULT_MAX]';
    let lo = 0;
    let hi = text.length;
    while (lo < hi) {
      const mid = Math.floor((lo + hi + 1) / 2);
      if (size(text.slice(0, mid) + note) <= budget) lo = mid;
      else hi = mid - 1;
    }
    return {'text/plain': size(note) <= budget ? clean(text.slice(0, lo)) + note : ''};
  }

  // The stack's lines that are the cell's: everything above the driver's own frames.
  function stackLines(e) {
    const lines = String(e.stack).split('\n');
    const out = [];
    for (const l of lines) {
      if (/^\s+at (new Script|Script\.runInContext|Object\.runInContext)\b/.test(l) ||
          /\bnode:vm\b/.test(l) || /\[eval\]/.test(l)) {
        break;
      }
      out.push(clean(l));
    }
    return out;
  }

  function errorFrame(e) {
    let f;
    if (e !== null && (typeof e === 'object' || typeof e === 'function') &&
        (util.types.isNativeError(e) || typeof e.stack === 'string')) {
      let name = 'Error';
      let message = '';
      try {
        name = typeof e.name === 'string' ? e.name : 'Error';
        message = typeof e.message === 'string' ? e.message : String(e.message);
      } catch (e2) { /* a getter that throws */ }
      let tb = [];
      try {
        tb = stackLines(e);
      } catch (e2) { /* nothing */ }
      f = {t: 'error', ename: clean(name).slice(0, 1000), evalue: clean(message), traceback: tb};
    } else {
      let v;
      try {
        v = typeof e === 'string' ? e : util.inspect(e);
      } catch (e2) {
        v = '?';
      }
      f = {t: 'error', ename: typeof e, evalue: clean(v), traceback: []};
    }
    if (frameLine(f).length > ERROR_LINE_MAX) f.evalue = f.evalue.slice(0, 8000) + '[... cut]';
    while (frameLine(f).length > ERROR_LINE_MAX && f.traceback.length > 2)
      f.traceback = f.traceback.slice(0, Math.floor(f.traceback.length / 2));
    if (frameLine(f).length > ERROR_LINE_MAX) {
      f.traceback = f.traceback.slice(0, 40).map((l) => l.slice(0, 150));
      f.evalue = f.evalue.slice(0, 1000);
    }
    return f;
  }

  // A Promise awaited, or the interrupt that came first.
  function awaitOrInterrupt(p) {
    return new Promise((resolve, reject) => {
      const onInt = () => {
        const e = new Error('Script execution interrupted.');
        e.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
        e.stack = 'Error: Script execution interrupted.';
        reject(e);
      };
      process.once('SIGINT', onInt);
      Promise.resolve(p).then(
          (v) => { process.removeListener('SIGINT', onInt); resolve(v); },
          (e) => { process.removeListener('SIGINT', onInt); reject(e); });
    });
  }

  let count = 0;
  async function run(code) {
    count++;
    const name = '<cell-' + count + '>';
    let result = null;
    let err = null;
    try {
      const script = new vm.Script(code, {filename: name});
      let v = script.runInContext(context, {breakOnSigint: true, displayErrors: false});
      if (v !== null && (typeof v === 'object' || typeof v === 'function') &&
          typeof v.then === 'function') {
        v = await awaitOrInterrupt(v);
      }
      if (v !== undefined) result = bounded(clean(util.inspect(v)));
    } catch (e) {
      err = errorFrame(e);
    }
    // What the cell queued for right now (promise reactions, setImmediate) runs before its end.
    await new Promise((r) => setImmediate(r));
    if (result) writeFrame({t: 'result', data: result});
    if (err) writeFrame(err);
    writeFrame({t: 'done'});
  }

  async function serve() {
    writeFrame({t: 'ready'});
    for (;;) {
      const code = readCell();
      if (code === null) break;
      await run(code);
    }
    process.reallyExit(0);
  }

  serve();
})();
