from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task

from typing import Dict, List, Literal, Optional

from .models import DayPlan, Itinerary


@CrewBase
class TravelCrew:
    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @agent
    def activity_planner(self) -> Agent:
        return Agent(config=self.agents_config["activity_planner"])

    @agent
    def itinerary_compiler(self) -> Agent:
        return Agent(config=self.agents_config["itinerary_compiler"])

    @task
    def activities_task(self) -> Task:
        return Task(config=self.tasks_config["activities_task"], output_pydantic=ActivityList)

    @task
    def itinerary_task(self) -> Task:
        return Task(config=self.tasks_config["itinerary_task"], output_json=Itinerary)

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks)
