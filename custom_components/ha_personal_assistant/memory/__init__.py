"""What the assistant knows about each person: the profile and how it learns."""
