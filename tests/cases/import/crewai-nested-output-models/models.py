from typing import Dict, List, Literal, Optional

from pydantic import BaseModel, Field


class Place(BaseModel):
    name: str = Field(..., description="Name of the place")
    location: str = Field(..., description="Address or area")


class Activity(Place):
    """One thing to do."""
    kind: Literal["museum", "food", "outdoors", "nightlife"] = Field(..., description="What kind of activity")
    date: str = Field(..., description="Date of the activity")
    rating: Optional[float] = Field(None, description="Rating out of 5")
    reviews: list[str] | None = None
    extra: Dict[str, str] = Field(default_factory=dict, description="Anything else worth knowing")


class DayPlan(BaseModel):
    date: str
    activities: List[Activity] = Field(..., description="List of activities")
    flight: Optional[str] = Field(None, description="Flight information")


class Itinerary(BaseModel):
    name: str = Field(..., description="Name of the itinerary, something funny")
    day_plans: List[DayPlan] = Field(..., description="List of day plans")
    hotel: str = Field(..., description="Hotel information")
