// Tokenize files with the extension's TextMate grammar, as VS Code does (vscode-textmate, vscode-oniguruma).
// Usage: node scripts/tokenize.js FILE...   Prints JSON: {file: [[line, start, end, [scopes...]], ...]}.
"use strict";

const fs = require("fs");
const path = require("path");
const oniguruma = require("vscode-oniguruma");
const textmate = require("vscode-textmate");

const here = path.resolve(__dirname, "..");
const wasm = fs.readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm"));

async function main(files) {
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new textmate.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (text) => new oniguruma.OnigString(text),
    }),
    loadGrammar: async (scopeName) => {
      if (scopeName !== "source.statewright") {
        return null;
      }
      const file = path.join(here, "syntaxes", "statewright.tmLanguage.json");
      return textmate.parseRawGrammar(fs.readFileSync(file, "utf8"), file);
    },
  });
  const grammar = await registry.loadGrammar("source.statewright");
  const out = {};
  for (const file of files) {
    const lines = fs.readFileSync(file, "utf8").split("\n");
    let state = textmate.INITIAL;
    const tokens = [];
    lines.forEach((line, number) => {
      const result = grammar.tokenizeLine(line, state);
      for (const token of result.tokens) {
        tokens.push([number, token.startIndex, Math.min(token.endIndex, line.length), token.scopes]);
      }
      state = result.ruleStack;
    });
    out[file] = tokens;
  }
  process.stdout.write(JSON.stringify(out));
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error);
  process.exit(1);
});
