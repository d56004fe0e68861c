// The statewright extension: the .fsm language, and a client for `statewright lsp`.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function serverOptions() {
  const config = vscode.workspace.getConfiguration("statewright");
  const command = config.get("server.command", "statewright");
  const args = config.get("server.args", ["lsp"]);
  // TransportKind.stdio passes --stdio, which `statewright lsp` accepts
  return { command, args, transport: TransportKind.stdio };
}

async function explain(code) {
  if (typeof code !== "string" || !code) {
    code = await vscode.window.showInputBox({ prompt: "A statewright diagnostic code", placeHolder: "SW2002" });
    if (!code) {
      return;
    }
  }
  const text = await client.sendRequest("workspace/executeCommand", {
    command: "statewright.explainCode",
    arguments: [code.trim().toUpperCase()],
  });
  const document = await vscode.workspace.openTextDocument({ content: text, language: "plaintext" });
  await vscode.window.showTextDocument(document, { preview: true, viewColumn: vscode.ViewColumn.Beside });
}

function activate(context) {
  client = new LanguageClient("statewright", "statewright", serverOptions(), {
    documentSelector: [
      { scheme: "file", language: "statewright" },
      { scheme: "untitled", language: "statewright" },
    ],
    // a diagnostic's code links to this extension's explain command
    initializationOptions: { explainLink: "command:statewright.explain?%5B%22{code}%22%5D" },
  });
  context.subscriptions.push(
    vscode.commands.registerCommand("statewright.explain", explain),
    vscode.commands.registerCommand("statewright.restartServer", () => client.restart()),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (event.affectsConfiguration("statewright.server")) {
        await client.stop();
        client = new LanguageClient("statewright", "statewright", serverOptions(), client.clientOptions);
        await client.start();
      }
    }),
  );
  return client.start().catch((error) => {
    vscode.window.showErrorMessage(
      `statewright: could not start the language server (${error.message}). Install it with ` +
        "pip install 'statewright[lsp]', or set statewright.server.command to its statewright program.",
    );
  });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
