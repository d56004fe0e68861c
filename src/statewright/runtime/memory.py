"""Agent memory: what each agent has seen, isolated per agent, viewed through its memory policy."""

from __future__ import annotations

from typing import Any


class AgentMemory:
    """The messages delivered to one agent: its own exchanges and the outputs it listens to.

    `messages` only ever grows (checkpoints store it as an append-only log); the policy decides how much
    of it a request carries: "all", "none" (nothing is kept) or "last" (the last `count` messages).
    """

    __slots__ = ("count", "messages", "policy")

    def __init__(self, policy: str = "all", count: int | None = None,
                 messages: list[dict[str, Any]] | None = None) -> None:
        self.policy = policy
        self.count = count or 0
        self.messages: list[dict[str, Any]] = messages if messages is not None else []

    def view(self) -> list[dict[str, Any]]:
        if self.policy == "all":
            return self.messages
        if self.policy == "last" and self.count > 0:
            return self.messages[-self.count:]
        return []

    def keep_exchange(self, instruction: str, reply: str) -> None:
        if self.policy != "none":
            self.messages.append({"role": "user", "content": instruction})
            self.messages.append({"role": "assistant", "content": reply})

    def hear(self, state: str, output_text: str) -> None:
        """A listened-to output, tagged with the state that produced it."""
        if self.policy != "none":
            self.messages.append({"role": "user", "content": f"[output of state '{state}']\n{output_text}"})
