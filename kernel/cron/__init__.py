"""Scheduled jobs (seed 000/001 Cron): schedules, workflows, the scheduler and runs.

Public API: ``kernel.cron.scheduler.CronScheduler`` (what the Kernel owns:
``start``/``stop``, create/update/pause/run jobs), ``kernel.cron.runner.JobRunner``,
``kernel.cron.jobs``'s ``CronJob``, ``job_view`` and ``state_view`` (the checked
definition and its JSON), and ``kernel.cron.tools`` (the agent's ``cron_*`` tools).
``schedule.py`` (when a job runs) and ``workflow.py`` (node chains) serve these.
"""
