# Copy to /etc/jupyter/nbgrader_config.py on the hub's machine: every user's nbgrader (fetch,
# submit, the instructor's release and collect) finds the course and its exchange here.
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "tt101"
c.Exchange.root = "/srv/nbgrader/exchange"
