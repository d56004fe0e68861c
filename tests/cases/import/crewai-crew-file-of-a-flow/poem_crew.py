from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task


@CrewBase
class PoemCrew:
    """A one-task crew, as a flow's crews/poem_crew/poem_crew.py holds it."""

    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @agent
    def poet(self) -> Agent:
        return Agent(config=self.agents_config["poet"], llm="openai/gpt-4o-mini")

    @task
    def write_poem(self) -> Task:
        return Task(config=self.tasks_config["write_poem"])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential, planning=True)
