"""What every page of the console shares: the request's user (`identity`), sign-in and
roles (`auth`, `login_throttle`), CSRF, headers and safe redirects (`security`), forms,
error pages (`errors`) and Jinja filters (`formatting`). It imports the layers below it,
jobwarden.console.core and jobwarden.console.data (docs/architecture.md, "Console layers")."""
