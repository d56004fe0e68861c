from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task


@CrewBase
class BrokenCrew:
    agents_config = "config/agents.yaml"

    @agent
    def writer(self) -> Agent
        return Agent(config=self.agents_config["writer"])
