from datetime import datetime

from research_crew.crew import ResearchCrew


def run():
    inputs = {"topic": "AI agents", "current_year": "2025"}
    ResearchCrew().crew().kickoff(inputs=inputs)
