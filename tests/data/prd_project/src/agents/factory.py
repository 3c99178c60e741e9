"""Creating agents from configuration."""

from __future__ import annotations

from dataclasses import dataclass, field

from src.agents.tools import Tool, default_tools


@dataclass
class AgentConfig:
    """What an agent is made of: a name, a model, a system prompt and its tools."""

    name: str
    model: str = "gpt-4o-mini"
    system_prompt: str = "You are a helpful support agent."
    tools: list[Tool] = field(default_factory=list)


class AgentFactory:
    """Builds configured agents; one factory per process, agents cached by name."""

    def __init__(self, registry: dict[str, AgentConfig]) -> None:
        self.registry = registry
        self._cache: dict[str, Agent] = {}

    def create_agent(self, name: str) -> Agent:
        """Return the agent called ``name``, building it from its config on first use."""
        if name not in self._cache:
            config = self.registry[name]
            tools = config.tools or default_tools()
            self._cache[name] = Agent(config.name, config.model, config.system_prompt, tools)
        return self._cache[name]

    def reset(self) -> None:
        """Forget every built agent, e.g. after the registry changed."""
        self._cache.clear()


class Agent:
    """A running agent: answers one turn with its model and tools."""

    def __init__(self, name: str, model: str, system_prompt: str, tools: list[Tool]) -> None:
        self.name = name
        self.model = model
        self.system_prompt = system_prompt
        self.tools = tools

    def answer(self, message: str) -> str:
        """Answer one user message (the model call is elided in this fixture)."""
        return f"[{self.name}] {message}"
