from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task

import os

from crewai_tools import ScrapeWebsiteTool, WebsiteSearchTool

from .schemas import Lead

scrape = ScrapeWebsiteTool()
ROLE = "Lead Qualifier"


@CrewBase
class LeadCrew:
    @agent
    def qualifier(self) -> Agent:
        return Agent(role=ROLE, goal="Qualify {company} as a sales lead",
                     backstory="You have qualified thousands of B2B leads.",
                     tools=[scrape, WebsiteSearchTool()], llm=os.environ["MODEL"])

    @agent
    def archivist(self) -> Agent:
        return Agent(role="Archivist", goal="File every lead", backstory="You keep the CRM tidy.")

    @task
    def qualify(self) -> Task:
        return Task(description="Research {company} and score it as a lead.",
                    expected_output=f"A score from 0 to 100 and the reasons for it.",
                    agent=self.qualifier(), output_pydantic=Lead)

    @task
    def summarise(self) -> Task:
        return Task(description="Summarise the lead for the sales team.",
                    expected_output="Three sentences.", agent=self.qualifier())

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential)
