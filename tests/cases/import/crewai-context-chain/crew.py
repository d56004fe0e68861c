from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task


@CrewBase
class StockCrew:
    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @agent
    def analyst(self) -> Agent:
        return Agent(config=self.agents_config["analyst"])

    @agent
    def researcher(self) -> Agent:
        return Agent(config=self.agents_config["researcher"])

    @agent
    def advisor(self) -> Agent:
        return Agent(config=self.agents_config["advisor"])

    @task
    def research(self) -> Task:
        return Task(config=self.tasks_config["research"])

    @task
    def financial_analysis(self) -> Task:
        return Task(config=self.tasks_config["financial_analysis"])

    @task
    def filings_analysis(self) -> Task:
        return Task(config=self.tasks_config["filings_analysis"])

    @task
    def recommend(self) -> Task:
        return Task(config=self.tasks_config["recommend"])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential, memory=True)
