from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task

from typing import List

from crewai_tools import ScrapeWebsiteTool, SerperDevTool
from pydantic import BaseModel, Field


class MarketStrategy(BaseModel):
    """Market strategy model"""
    name: str = Field(..., description="Name of the market strategy")
    tactics: List[str] = Field(..., description="List of tactics to be used in the market strategy")
    channels: List[str] = Field(..., description="List of channels to be used in the market strategy")
    KPIs: List[str] = Field(..., description="List of KPIs to be used in the market strategy")


class CampaignIdea(BaseModel):
    name: str = Field(..., description="Name of the campaign idea")
    description: str = Field(..., description="Description of the campaign idea")
    audience: str = Field(..., description="Audience of the campaign idea")
    channel: str = Field(..., description="Channel of the campaign idea")


class Copy(BaseModel):
    title: str = Field(..., description="Title of the copy")
    body: str = Field(..., description="Body of the copy")


@CrewBase
class MarketingPostsCrew:
    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @agent
    def lead_market_analyst(self) -> Agent:
        return Agent(config=self.agents_config["lead_market_analyst"],
                     tools=[SerperDevTool(), ScrapeWebsiteTool()], memory=False)

    @agent
    def chief_marketing_strategist(self) -> Agent:
        return Agent(config=self.agents_config["chief_marketing_strategist"],
                     tools=[SerperDevTool(), ScrapeWebsiteTool()])

    @agent
    def creative_content_creator(self) -> Agent:
        return Agent(config=self.agents_config["creative_content_creator"])

    @task
    def research_task(self) -> Task:
        return Task(config=self.tasks_config["research_task"], agent=self.lead_market_analyst())

    @task
    def project_understanding_task(self) -> Task:
        return Task(config=self.tasks_config["project_understanding_task"],
                    agent=self.chief_marketing_strategist())

    @task
    def marketing_strategy_task(self) -> Task:
        return Task(config=self.tasks_config["marketing_strategy_task"],
                    agent=self.chief_marketing_strategist(), output_json=MarketStrategy)

    @task
    def campaign_idea_task(self) -> Task:
        return Task(config=self.tasks_config["campaign_idea_task"],
                    agent=self.creative_content_creator(), output_json=CampaignIdea)

    @task
    def copy_creation_task(self) -> Task:
        return Task(config=self.tasks_config["copy_creation_task"], agent=self.creative_content_creator(),
                    context=[self.marketing_strategy_task(), self.campaign_idea_task()],
                    output_pydantic=Copy)

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks, process=Process.sequential, verbose=True)
