from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task


@CrewBase
class NewsletterCrew:
    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @agent
    def news_researcher(self) -> Agent:
        return Agent(config=self.agents_config["news_researcher"])

    @agent
    def paper_researcher(self) -> Agent:
        return Agent(config=self.agents_config["paper_researcher"])

    @agent
    def writer(self) -> Agent:
        return Agent(config=self.agents_config["writer"])

    @task
    def plan_task(self) -> Task:
        return Task(config=self.tasks_config["plan_task"])

    @task
    def news_task(self) -> Task:
        return Task(config=self.tasks_config["news_task"], async_execution=True)

    @task
    def papers_task(self) -> Task:
        return Task(config=self.tasks_config["papers_task"], async_execution=True)

    @task
    def newsletter_task(self) -> Task:
        return Task(config=self.tasks_config["newsletter_task"])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential)
