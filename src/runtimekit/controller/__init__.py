"""The node-label controller, job cleanup and the job-agent."""
