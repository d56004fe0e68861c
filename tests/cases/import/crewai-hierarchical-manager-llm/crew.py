from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task


@CrewBase
class ArticleCrew:
    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @agent
    def researcher(self) -> Agent:
        return Agent(config=self.agents_config["researcher"], allow_delegation=False)

    @agent
    def writer(self) -> Agent:
        return Agent(config=self.agents_config["writer"], allow_delegation=False)

    @task
    def ideas_task(self) -> Task:
        return Task(config=self.tasks_config["ideas_task"])

    @task
    def article_task(self) -> Task:
        return Task(config=self.tasks_config["article_task"])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.hierarchical,
                    manager_llm="openai/gpt-4o")
