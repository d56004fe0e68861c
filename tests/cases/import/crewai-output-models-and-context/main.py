from marketing_posts.crew import MarketingPostsCrew


def run():
    inputs = {
        "customer_domain": "crewai.com",
        "project_description": "A campaign for CrewAI's enterprise offering.",
    }
    MarketingPostsCrew().crew().kickoff(inputs=inputs)
