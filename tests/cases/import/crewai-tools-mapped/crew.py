from crewai import Agent, Crew, Process, Task
from crewai.project import CrewBase, agent, crew, task

from crewai.tools import tool
from crewai_tools import (CodeDocsSearchTool, CodeInterpreterTool, DirectoryReadTool, FileReadTool,
                          FileWriterTool, GithubSearchTool)

docs_tool = CodeDocsSearchTool(docs_url="https://docs.python.org/3/")


@tool("Count lines")
def count_lines(path: str) -> str:
    """Count the lines of a file."""
    return str(len(open(path).read().splitlines()))


@CrewBase
class FixCrew:
    agents_config = "config/agents.yaml"
    tasks_config = "config/tasks.yaml"

    @tool
    def lint_tool(self):
        return GithubSearchTool(gh_token="...")

    @agent
    def engineer(self) -> Agent:
        return Agent(config=self.agents_config["engineer"],
                     tools=[FileReadTool(), FileWriterTool(), DirectoryReadTool(), docs_tool, self.lint_tool()])

    @agent
    def reviewer(self) -> Agent:
        return Agent(config=self.agents_config["reviewer"], tools=[FileReadTool(), CodeInterpreterTool()])

    @task
    def fix_task(self) -> Task:
        return Task(config=self.tasks_config["fix_task"])

    @task
    def review_task(self) -> Task:
        return Task(config=self.tasks_config["review_task"], tools=[count_lines])

    @crew
    def crew(self) -> Crew:
        return Crew(agents=self.agents, tasks=self.tasks)
