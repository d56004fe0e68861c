from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task


@CrewBase
class NewsroomCrew:
    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @agent
    def reporter(self) -> Agent:
        return Agent(config=self.agents_config["reporter"])

    @agent
    def fact_checker(self) -> Agent:
        return Agent(config=self.agents_config["fact_checker"])

    @task
    def check_task(self) -> Task:
        return Task(config=self.tasks_config["check_task"])

    @task
    def report_task(self) -> Task:
        return Task(config=self.tasks_config["report_task"])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=[self.reporter(), self.fact_checker()],
                    tasks=[self.report_task(), self.check_task()])
