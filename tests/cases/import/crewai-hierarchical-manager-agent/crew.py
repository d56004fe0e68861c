from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task


@CrewBase
class LaunchCrew:
    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    def project_manager(self) -> Agent:
        return Agent(config=self.agents_config["project_manager"], allow_delegation=True)

    @agent
    def copywriter(self) -> Agent:
        return Agent(config=self.agents_config["copywriter"])

    @agent
    def designer(self) -> Agent:
        return Agent(config=self.agents_config["designer"], llm="anthropic/claude-3-5-haiku-latest")

    @task
    def copy_task(self) -> Task:
        return Task(config=self.tasks_config["copy_task"])

    @task
    def visuals_task(self) -> Task:
        return Task(config=self.tasks_config["visuals_task"])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.hierarchical,
                    manager_agent=self.project_manager())
