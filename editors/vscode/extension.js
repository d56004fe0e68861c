// The statewright extension: the .fsm language, and a client for `statewright lsp`.
//
// The server runs what the editor shows: its code lenses run a test block, all of a file's tests, or write
// the file's runner (its commands, statewright.runTest, statewright.runTests and statewright.compileRunner,
// are registered by the client as the server advertises them). The commands below are the palette's ways
// to the same things, and the way back from a line of a generated runner to its .fsm position.
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

// What the server reads from initializationOptions, and again from workspace/didChangeConfiguration.
function serverSettings() {
  const config = vscode.workspace.getConfiguration("statewright");
  return {
    // a diagnostic's code links to this extension's explain command (other editors get no link by default)
    explainLink: "command:statewright.explain?%5B%22{code}%22%5D",
    compileOnSave: config.get("compileOnSave", false),
    runnerPath: config.get("runnerPath", "{dir}/{stem}_runner.py"),
    runnerStandalone: config.get("runnerStandalone", false),
  };
}

function clientOptions() {
  return {
    documentSelector: [
      { scheme: "file", language: "statewright" },
      { scheme: "untitled", language: "statewright" },
    ],
    initializationOptions: serverSettings(),
    // sends the `statewright` settings to the server whenever they change
    synchronize: { configurationSection: "statewright" },
  };
}

function executeCommand(command, args) {
  return client.sendRequest("workspace/executeCommand", { command, arguments: args });
}

async function explain(code) {
  if (typeof code !== "string" || !code) {
    code = await vscode.window.showInputBox({ prompt: "A statewright diagnostic code", placeHolder: "SW2002" });
    if (!code) {
      return;
    }
  }
  const text = await executeCommand("statewright.explainCode", [code.trim().toUpperCase()]);
  const document = await vscode.workspace.openTextDocument({ content: text, language: "plaintext" });
  await vscode.window.showTextDocument(document, { preview: true, viewColumn: vscode.ViewColumn.Beside });
}

// The .fsm file in the active editor, or undefined (with a message saying what is needed).
function activeSpec() {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== "statewright") {
    vscode.window.showWarningMessage("statewright: open a .fsm file first");
    return undefined;
  }
  return editor.document.uri.toString();
}

// Run the tests, or write the runner, of the .fsm file in the active editor. The server shows the outcome.
async function onActiveSpec(command) {
  const uri = activeSpec();
  if (uri) {
    await executeCommand(command, [uri]);
  }
}

// From the line under the cursor in a generated runner to the .fsm position it was written from.
async function goToSpec() {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    vscode.window.showWarningMessage("statewright: open a generated runner first");
    return;
  }
  const line = editor.selection.active.line;
  const location = await executeCommand("statewright.runnerSource", [editor.document.uri.toString(), line]);
  if (!location) {
    vscode.window.showInformationMessage(
      `statewright: line ${line + 1} comes from no one place of the spec (the runtime, an import or a type's class)`,
    );
    return;
  }
  const start = new vscode.Position(location.range.start.line, location.range.start.character);
  const document = await vscode.workspace.openTextDocument(vscode.Uri.parse(location.uri));
  await vscode.window.showTextDocument(document, { selection: new vscode.Range(start, start) });
}

function activate(context) {
  client = new LanguageClient("statewright", "statewright", serverOptions(), clientOptions());
  context.subscriptions.push(
    vscode.commands.registerCommand("statewright.explain", explain),
    vscode.commands.registerCommand("statewright.restartServer", () => client.restart()),
    vscode.commands.registerCommand("statewright.runFileTests", () => onActiveSpec("statewright.runTests")),
    vscode.commands.registerCommand("statewright.compileFile", () => onActiveSpec("statewright.compileRunner")),
    vscode.commands.registerCommand("statewright.goToSpec", goToSpec),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (event.affectsConfiguration("statewright.server")) {
        await client.stop();
        client = new LanguageClient("statewright", "statewright", serverOptions(), clientOptions());
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
