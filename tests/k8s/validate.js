#!/usr/bin/env node
// Parse Kubernetes manifests and validate every document against the Kubernetes API
// schemas of the npm package kubernetes-models (its generated validators), plus a strict
// unknown-field check (what `kubectl apply --validate=strict` and the API server's strict
// field validation refuse; the generated validators let unknown fields through), built
// from the package's own type declarations.
//
//   node tests/k8s/validate.js FILE.yaml...
//
// Prints one JSON object: {"documents": [{file, index, apiVersion, kind, validated, doc}],
// "errors": [{file, index, kind, message}]}. Exit status 0 when errors is empty, 1 when not,
// 2 on a usage or installation problem. Reads no network.
"use strict";

const fs = require("fs");
const path = require("path");

let yaml;
try {
  yaml = require("js-yaml");
  require.resolve("kubernetes-models/package.json");
} catch (e) {
  process.stderr.write(
    "validate.js: npm packages missing; run `npm ci --prefix tests/k8s` (" + e.message + ")\n"
  );
  process.exit(2);
}

const MODELS_DIR = path.dirname(require.resolve("kubernetes-models/package.json"));
const NODE_MODULES = path.dirname(MODELS_DIR);

// Documents of these API groups are not Kubernetes API objects (kustomize's own config);
// the Python tests check them.
const NOT_API = new Set(["kustomize.config.k8s.io"]);

function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9]+$/.test(kind))
    return null;
  // "v1" -> kubernetes-models/v1/Kind; "apps/v1" -> kubernetes-models/apps/v1/Kind
  const parts = apiVersion.split("/");
  if (parts.length > 2 || parts.some((p) => !/^[a-z0-9.-]+$/.test(p))) return null;
  const file = path.join(MODELS_DIR, ...parts, kind + ".js");
  if (!fs.existsSync(file)) return null;
  const mod = require(file);
  return { cls: mod[kind], dts: file.replace(/\.js$/, ".d.ts") };
}

// ---- strict fields: property names and types from the .d.ts interfaces -------------------

const ifaceCache = new Map(); // .d.ts path -> {props: Map(name -> type string), imports}

function parseDts(file) {
  if (ifaceCache.has(file)) return ifaceCache.get(file);
  let info = null;
  if (fs.existsSync(file)) {
    const text = fs.readFileSync(file, "utf8");
    const imports = new Map();
    for (const m of text.matchAll(/^import \{ ([^}]+) \} from "([^"]+)";$/gm)) {
      for (const name of m[1].split(",").map((s) => s.trim()))
        if (name) imports.set(name, m[2]);
    }
    // The first exported interface is the model's own shape.
    const start = text.search(/^export interface I\w+(?: extends [\w, ]+)? \{$/m);
    if (start >= 0) {
      const props = new Map();
      const lines = text.slice(start).split("\n");
      for (let i = 1; i < lines.length; i++) {
        if (lines[i] === "}") break;
        const m = /^ {4}"([^"]+)"\??: (.+)$/.exec(lines[i]);
        if (!m) continue;
        let type = m[2];
        // A map type spans lines: `{`, `    [key: string]: T;`, `};`
        while (!type.endsWith(";") && i + 1 < lines.length && lines[i] !== "}")
          type += " " + lines[++i].trim();
        props.set(m[1], type.replace(/;$/, "").replace(/\s+/g, " "));
      }
      info = { props, imports };
    }
  }
  ifaceCache.set(file, info);
  return info;
}

function resolveImport(fromFile, spec) {
  if (spec.startsWith(".")) return path.resolve(path.dirname(fromFile), spec + ".d.ts");
  if (spec.startsWith("@kubernetes-models/")) return path.join(NODE_MODULES, spec + ".d.ts");
  return null;
}

// Walk `value` against the type string `type` declared in `file`; report unknown fields.
function checkType(value, type, file, where, errors) {
  type = type.trim();
  let m;
  if ((m = /^Array<(.+)>$/.exec(type))) {
    if (Array.isArray(value))
      value.forEach((v, i) => checkType(v, m[1], file, where + "/" + i, errors));
    return;
  }
  if ((m = /^\{ \[key: string\]: (.+?);? \}$/.exec(type))) {
    if (value && typeof value === "object" && !Array.isArray(value))
      for (const [k, v] of Object.entries(value)) checkType(v, m[1], file, where + "/" + k, errors);
    return;
  }
  if (!/^I\w+$/.test(type)) return; // string, number, boolean, unions of literals, any
  const info = parseDts(file);
  const spec = info && info.imports.get(type);
  const target = spec ? resolveImport(file, spec) : null;
  if (target) checkObject(value, target, where, errors);
}

function checkObject(value, dtsFile, where, errors) {
  if (!value || typeof value !== "object" || Array.isArray(value)) return;
  const info = parseDts(dtsFile);
  if (!info) return; // a type alias (IntOrString, Quantity, ...): nothing to check
  for (const [k, v] of Object.entries(value)) {
    if (!info.props.has(k)) {
      errors.push(where + "/" + k + ': unknown field "' + k + '"');
      continue;
    }
    checkType(v, info.props.get(k), dtsFile, where + "/" + k, errors);
  }
}

// ---- main ---------------------------------------------------------------------------------

function main(files) {
  const out = { documents: [], errors: [] };
  for (const file of files) {
    let docs;
    try {
      docs = yaml.loadAll(fs.readFileSync(file, "utf8"));
    } catch (e) {
      out.errors.push({ file, index: -1, kind: null, message: "YAML: " + e.message });
      continue;
    }
    docs.forEach((doc, index) => {
      if (doc === null || doc === undefined) return; // empty document between ---
      const fail = (message) =>
        out.errors.push({ file, index, kind: doc && doc.kind, message });
      if (typeof doc !== "object" || Array.isArray(doc)) {
        fail("a manifest document must be a mapping");
        return;
      }
      const entry = { file, index, apiVersion: doc.apiVersion, kind: doc.kind, validated: false, doc };
      out.documents.push(entry);
      const group = String(doc.apiVersion || "").split("/")[0];
      if (NOT_API.has(group)) return;
      const model = modelFor(doc.apiVersion, doc.kind);
      if (!model || typeof model.cls !== "function") {
        fail("no Kubernetes API schema for apiVersion " + doc.apiVersion + " kind " + doc.kind);
        return;
      }
      try {
        new model.cls(doc).validate();
      } catch (e) {
        fail("schema: " + e.message);
        return;
      }
      const unknown = [];
      checkObject(doc, model.dts, "", unknown);
      for (const u of unknown) fail("strict: " + u);
      if (!unknown.length) entry.validated = true;
    });
  }
  return out;
}

const files = process.argv.slice(2);
if (!files.length) {
  process.stderr.write("usage: node validate.js FILE.yaml...\n");
  process.exit(2);
}
const result = main(files);
process.stdout.write(JSON.stringify(result, null, 1) + "\n");
process.exit(result.errors.length ? 1 : 0);
