"""Printing an imported machine as `.fsm` text, then through the formatter so the file is canonical.

Everything quoted here is a value first (a prompt, a condition, a template) and is written in the form
the parser reads back as exactly that value; the formatter then settles the layout.
"""

from __future__ import annotations

import re
import textwrap

from ..compiler.views.formatter import format_source
from ..compiler.views.source_text import double_quoted, fits_triple_quotes
from ..diagnostics import SourceFile
from ..grammar.parser import decode_long_string
from ..runtime.trace import printable
from .model import Agent, Input, Machine, State, TestBlock, Tool, Transition, TypeDecl, type_text

_LONG_STRING = re.compile(r'"""[^"]*(?:"(?!"")[^"]*)*"""')  # unrolled: no regex state per character
_JINJA_MARKUP = re.compile(r"\{[{%#]")
_WIDTH = 110


def literal_template(text: str) -> str:
    """A Jinja template that renders to exactly `text`: every `{{`, `{%` and `{#` is printed by an expression.

    Imported prompts are plain text; braces in them (code samples, JSON) must not become template markup.
    """
    return _JINJA_MARKUP.sub(lambda m: "{{ '" + m.group(0) + "' }}", text)


_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


def placeholder_template(text: str, variables: dict[str, str]) -> str:
    """`text` as a template in which a `{key}` placeholder of `variables` (keys mapped to input names) reads
    that input, and everything else is kept as it is written (AutoAgent's and CrewAI's `{topic}`)."""
    out: list[str] = []
    last = 0
    for m in _PLACEHOLDER.finditer(text):
        if m.group(1) in variables:
            out.append(literal_template(text[last : m.start()]))
            out.append("{{ " + variables[m.group(1)] + " }}")
            last = m.end()
    out.append(literal_template(text[last:]))
    return "".join(out)


def placeholders(text: str) -> list[str]:
    """The `{key}` placeholders of `text`, in order, each once."""
    return list(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(text)))


def fsm_string(value: str) -> str:
    """A string literal for `value`: triple-quoted when it spans lines, holds no control character a raw
    string cannot show (a carriage return or a line separator would be a line break of its own to an
    editor), and reads back unchanged that way."""
    if "\n" in value and fits_triple_quotes(value):
        text = f'"""\n{value}\n"""'
        if _LONG_STRING.fullmatch(text) and decode_long_string(text) == value:
            return text
    return double_quoted(value)


def _comments(lines: list[str], indent: str) -> list[str]:
    """Comment lines at `indent`, long ones wrapped to the project's 110 columns."""
    out = []
    for line in lines:
        # names and descriptions of the imported file explain the result here: a control character of
        # theirs (an escape sequence, a carriage return) is written escaped, never into the .fsm text raw
        line = printable(line)
        if not line:
            out.append(f"{indent}#")
            continue
        width = max(40, _WIDTH - len(indent) - 2)
        lead = line[: len(line) - len(line.lstrip())]
        for part in textwrap.wrap(line, width, subsequent_indent=lead, break_long_words=False,
                                  break_on_hyphens=False) or [line]:
            out.append(f"{indent}# {part}".rstrip())
    return out


def render_machine(machine: Machine, path: str) -> str:
    """The canonical `.fsm` text of `machine` (`path` only names the text in a formatter error)."""
    out = _comments(machine.header, "")
    if machine.header:
        out.append("")
    out.extend(f"use {double_quoted(path)}" for path in machine.uses)
    out.append(f"machine {machine.name} {{")
    for item in machine.inputs:
        out.extend(_input(item))
    if machine.returns is not None:
        out.append(f"    returns {type_text(machine.returns)}")
    if machine.model is not None:
        out.append(f"    model {fsm_string(machine.model)}")
    if machine.steps is not None:
        out.extend(_comments([machine.steps_comment] if machine.steps_comment else [], "    "))
        out.append(f"    limits {{ steps {machine.steps} }}")
    for decl in machine.types:
        out.extend(_type(decl))
    for tool in machine.tools:
        out.extend(_tool(tool))
    for agent in machine.agents:
        out.extend(_agent(agent))
    for state in machine.states:
        out.extend(_state(state))
    for test in [machine.test] if machine.test is not None else []:
        out.extend(_test(test))
    for test in machine.tests:
        out.extend(_test(test))
    if machine.test is None and not machine.tests and machine.test_comment:
        out.extend(_comments([machine.test_comment], "    "))
    out.append("}")
    text = "\n".join(out) + "\n"
    formatted = format_source(SourceFile(path, text))
    if formatted.text is None:
        problems = "; ".join(d.message for d in formatted.diagnostics)
        raise RuntimeError(f"the importer wrote a file the formatter refuses: {problems}\n{text}")
    return formatted.text


def _input(item: Input) -> list[str]:
    default = f" = {double_quoted(item.default)}" if item.default is not None else ""
    return [*_comments(item.comments, "    "), f"    input {item.name}: str{default}"]


def _type(decl: TypeDecl) -> list[str]:
    lines = [*_comments(decl.comments, "    "), f"    type {decl.name} {{"]
    for f in decl.fields:
        doc = f" {double_quoted(f.doc)}" if f.doc else ""
        lines.append(f"        {f.name}: {type_text(f.shape)}{doc}")
    lines.append("    }")
    return lines


def _tool(tool: Tool) -> list[str]:
    path = f" = {double_quoted(tool.import_path)}" if tool.import_path is not None else ""
    return [*_comments(tool.comments, "    "), f"    tool {tool.name}{path}"]


def _agent(agent: Agent) -> list[str]:
    lines = [*_comments(agent.comments, "    "), f"    agent {agent.name} {{"]
    if agent.prompt is not None:
        lines.append(f"        prompt {fsm_string(agent.prompt)}")
    if agent.model is not None:
        lines.append(f"        model {fsm_string(agent.model)}")
    if agent.tools:
        lines.append(f"        tools [{', '.join(agent.tools)}]")
    if agent.memory is not None:
        lines.append(f"        memory {agent.memory}")
    lines.append("    }")
    return lines


def _state(state: State) -> list[str]:
    head = (("start " if state.start else "") + ("final " if state.final else "") + ("branch " if state.branch else "")
            + f"state {state.name}")
    lines = _comments(state.comments, "    ")
    body: list[str] = []
    if state.parallel:
        body.append(f"parallel [{', '.join(state.parallel)}]")
    if state.run is not None:
        args = ", ".join(f"{name} = {value}" for name, value in state.run.args)
        body.append(f"run {state.run.machine}({args})")
    if state.agent is not None:
        body.append(f"agent {state.agent}")
    if state.instruction is not None:
        body.append(f"do {fsm_string(state.instruction)}")
    if state.ask is not None:
        body.append(f"ask {fsm_string(state.ask)}")
    if state.output is not None:
        body.append(f"output {type_text(state.output)}")
    if state.tell:
        body.append(f"tell [{', '.join(state.tell)}]")
    if state.result is not None:
        body.append(f"result {fsm_string(state.result)}")
    if state.fail_reason is not None:
        body.append(f"fail {fsm_string(state.fail_reason)}")
    body.extend(_transition(t) for t in state.transitions)
    if not body:
        return [*lines, f"    {head}"]
    return [*lines, f"    {head} {{", *(f"        {line}" for line in body), "    }"]


def _transition(t: Transition) -> str:
    bound = f" max {t.bound}" if t.bound is not None else ""
    if t.bound is not None and t.per_visit:
        bound += " per visit"
    if t.stay:
        return f"otherwise stay{bound}"
    if t.otherwise:
        return f"otherwise -> {t.target}{bound}"
    if t.guard is not None:
        return f"when {t.guard} -> {t.target}{bound}"
    if t.condition is not None:
        return f"when {double_quoted(t.condition)} -> {t.target}{bound}"
    return f"-> {t.target}{bound}"


def _test(test: TestBlock) -> list[str]:
    lines = [f"    test {double_quoted(test.name)} {{"]
    if test.inputs:
        lines.append("        input {")
        lines.extend(f"            {name} {double_quoted(value)}" for name, value in test.inputs.items())
        lines.append("        }")
    for step in test.steps:
        if step.kind == "reply" and step.value is not None:
            lines.append(f"        reply {step.state} {step.value}")
        elif step.kind == "reply":
            lines.append(f"        reply {step.state} {double_quoted(step.text or '')}")
        else:
            verdict = double_quoted(step.text) if step.text is not None else "none"
            lines.append(f"        verdict {step.state} {verdict}")
    lines.append(f"        expect path [{', '.join(test.path)}]")
    lines.extend(f"        expect output {state} {value}" for state, value in test.outputs)
    if test.failure is not None:
        lines.append(f"        expect failure {test.failure}")
    else:
        lines.append(f"        expect final {test.final}")
    lines.append("    }")
    return lines
