// Load the VS Code extension under node with stand-ins for `vscode` and `vscode-languageclient/node`, run a
// scenario, and print what the extension did as JSON: the client it made, the commands it registered, the
// requests it sent and the editors it opened. tests/test_vscode_extension.py drives it.
// Usage: node vscode_harness.js EXTENSION_DIR SCENARIO_JSON
// SCENARIO: {settings: {...}, editor: {uri, languageId, line} | null, run: [command...], replies: {command: value}}
"use strict";

const Module = require("module");
const path = require("path");

const [extensionDir, scenarioText] = process.argv.slice(2);
const scenario = JSON.parse(scenarioText);
const seen = { clients: [], registered: [], requests: [], messages: [], opened: [], shown: [] };

class Position {
  constructor(line, character) {
    Object.assign(this, { line, character });
  }
}
class Range {
  constructor(start, end) {
    Object.assign(this, { start, end });
  }
}

const editor = scenario.editor && {
  document: { uri: { toString: () => scenario.editor.uri }, languageId: scenario.editor.languageId },
  selection: { active: new Position(scenario.editor.line, 0) },
};

const vscode = {
  Position,
  Range,
  ViewColumn: { Beside: -2 },
  Uri: { parse: (text) => ({ parsed: text }) },
  workspace: {
    getConfiguration: (section) => ({
      get: (key, fallback) => {
        const value = (scenario.settings || {})[`${section}.${key}`];
        return value === undefined ? fallback : value;
      },
    }),
    onDidChangeConfiguration: () => ({ dispose() {} }),
    openTextDocument: async (what) => {
      seen.opened.push(what);
      return { opened: what };
    },
  },
  window: {
    activeTextEditor: editor,
    showWarningMessage: (text) => seen.messages.push(["warning", text]),
    showInformationMessage: (text) => seen.messages.push(["info", text]),
    showErrorMessage: (text) => seen.messages.push(["error", text]),
    showInputBox: async () => undefined,
    showTextDocument: async (document, options) => {
      seen.shown.push({ document, options });
    },
  },
  commands: {
    registerCommand: (name, handler) => {
      seen.registered.push(name);
      commands[name] = handler;
      return { dispose() {} };
    },
  },
};
const commands = {};

class LanguageClient {
  constructor(id, name, serverOptions, clientOptions) {
    seen.clients.push({ id, name, serverOptions, clientOptions });
  }
  start() {
    return Promise.resolve();
  }
  stop() {
    return Promise.resolve();
  }
  sendRequest(method, params) {
    seen.requests.push({ method, params });
    const replies = scenario.replies || {};
    return Promise.resolve(params && params.command in replies ? replies[params.command] : null);
  }
}
const languageClient = { LanguageClient, TransportKind: { stdio: 0 } };

const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === "vscode" || request === "vscode-languageclient/node") {
    return request;
  }
  return resolve.call(this, request, ...rest);
};
require.cache.vscode = { id: "vscode", filename: "vscode", loaded: true, exports: vscode };
require.cache["vscode-languageclient/node"] = {
  id: "vscode-languageclient/node", filename: "vscode-languageclient/node", loaded: true, exports: languageClient,
};

async function main() {
  const extension = require(path.resolve(extensionDir, "extension.js"));
  await extension.activate({ subscriptions: [] });
  for (const name of scenario.run || []) {
    await commands[name]();
  }
  process.stdout.write(JSON.stringify(seen));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
