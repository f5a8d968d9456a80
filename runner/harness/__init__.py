"""Running a plan: the Runner, its dispatcher, environments, validation and the recorder."""
