"""The console mounted under /ops/jobs in a host app that has its own login (Flask-Login),
its own templates, error pages and an `auth` blueprint: the console uses the host's users,
keeps its checks, and leaves the host's pages as they were."""

from __future__ import annotations

import re

import pytest
from flask import (
    Blueprint,
    Flask,
    render_template,
    render_template_string,
    request,
    session,
    template_rendered,
)
from flask_login import LoginManager, UserMixin, current_user, login_user, logout_user
from flask_wtf.csrf import validate_csrf
from sqlalchemy import event

from jobwarden.console import Console
from jobwarden.console.data import sample_data
from tests.helpers import job_row, scalar

#: The session's CSRF token as every console page carries it (htmx sends it as a header).
_CSRF = re.compile(r'"X-CSRFToken": "([^"]+)"')
#: The host's own accounts: name -> console role (None: staff without console access).
HOST_USERS = {"hannah": "operator", "viv": "viewer", "sam": None, "root": "admin",
              "sop": "operator", "odd": "superuser", "\u202egnp.exe": "operator",
              "x" * 500: "viewer"}


class HostUser(UserMixin):
    def __init__(self, name: str):
        self.id = name
        self.console_role = HOST_USERS[name]


def host_identity():
    """The host's hook: its signed-in user's name and console role, or None."""
    if current_user.is_authenticated and current_user.console_role:
        return current_user.id, current_user.console_role
    return None


def make_host(tmp_path, database_url: str, host_config: dict | None = None,
              **console_options) -> Flask:
    templates = tmp_path / "templates"
    templates.mkdir(exist_ok=True)
    # Names the console's own templates also have: neither may shadow the other.
    (templates / "base.html").write_text("HOST BASE {% block content %}{% endblock %}")
    (templates / "error.html").write_text("HOST ERROR")
    app = Flask("host", template_folder=str(templates))
    app.config.update(SECRET_KEY="host-secret", TESTING=True, **(host_config or {}))
    logins = LoginManager(app)
    logins.user_loader(lambda name: HostUser(name) if name in HOST_USERS else None)
    auth = Blueprint("auth", __name__)  # the console has an `auth` area too

    @auth.route("/login")
    def login():
        login_user(HostUser(request.args["as"]))
        return "signed in"

    @auth.post("/logout")
    def logout():  # the host's sign-out, with Flask-WTF's CSRF check as a host has it
        validate_csrf(request.form.get("csrf_token"))
        logout_user()
        return "signed out"

    @auth.get("/bye")
    def bye():  # a host whose sign-out is a plain link
        logout_user()
        return "signed out"

    app.register_blueprint(auth)

    @app.get("/remember")
    def remember():  # the host's "keep me signed in": a permanent session
        session.permanent = True
        return "remembered"

    @app.get("/")
    def home():
        return render_template("base.html")

    @app.get("/note")
    def note():  # the console's redaction must not reach the host's own pages
        return render_template_string("{{ note }}", note="api_token=host-visible")

    @app.post("/api/ping")
    def ping():  # an API without CSRF tokens: the console must not start guarding it
        return "pong"

    @app.errorhandler(404)
    def host_not_found(error):
        return "host 404", 404

    Console(app, url_prefix="/ops/jobs", database_url=database_url, **console_options)
    return app


@pytest.fixture
def host(tmp_path, clean_db):
    app = make_host(tmp_path, clean_db, user_loader=host_identity, login_view="auth.login")
    yield app
    app.extensions["jobwarden_db"].dispose()


@pytest.fixture
def failed_job(engine):
    with engine.begin() as conn:
        return sample_data.insert_job(conn, "sync_crm", "failed", error_code="CRM_UNAVAILABLE",
                                      error="CRM answered 503")


def signed_in(app, name: str):
    client = app.test_client()
    assert client.get("/login", query_string={"as": name}).status_code == 200
    return client


def token(client, path: str) -> str:
    return _CSRF.search(client.get(path).get_data(as_text=True)).group(1)


def retry(client, job_id: int, csrf: str | None):
    data = {"reason": "CRM is back", "request_id": f"r-{job_id}-{csrf is None}",
            "expected_status": "failed"}
    if csrf:
        data["csrf_token"] = csrf
    return client.post(f"/ops/jobs/jobs/{job_id}/retry", data=data)


def test_a_stranger_is_sent_to_the_hosts_login_and_htmx_is_told_where(host):
    client = host.test_client()
    page = client.get("/ops/jobs/failed")
    assert page.status_code == 302
    assert page.headers["Location"] == "/login?next=/ops/jobs/failed"
    fragment = client.get("/ops/jobs/_overview/counts", headers={"HX-Request": "true"})
    assert fragment.status_code == 401
    assert fragment.headers["HX-Redirect"].startswith("/login")
    assert signed_in(host, "sam").get("/ops/jobs/").status_code == 302  # staff, no console role


def test_without_a_login_view_a_stranger_gets_403(tmp_path, clean_db):
    app = make_host(tmp_path, clean_db, user_loader=host_identity)
    try:
        response = app.test_client().get("/ops/jobs/failed")
    finally:
        app.extensions["jobwarden_db"].dispose()
    assert response.status_code == 403
    assert "Not allowed" in response.get_data(as_text=True)


def test_an_operators_retry_is_audited_under_the_hosts_user_name(host, failed_job, clean_db):
    client = signed_in(host, "hannah")
    page = client.get(f"/ops/jobs/jobs/{failed_job}").get_data(as_text=True)
    assert f'action="/ops/jobs/jobs/{failed_job}/retry"' in page
    response = retry(client, failed_job, token(client, f"/ops/jobs/jobs/{failed_job}"))
    assert response.status_code == 303
    assert response.headers["Location"] == f"/ops/jobs/jobs/{failed_job}"
    assert job_row(clean_db, failed_job)["status"] == "pending"
    assert scalar(clean_db, "SELECT actor || '/' || role || '/' || reason FROM job_audit") == (
        "host:hannah/operator/CRM is back")


def test_a_viewer_sees_no_actions_and_a_posted_action_gets_403(host, failed_job, clean_db):
    client = signed_in(host, "viv")
    page = client.get(f"/ops/jobs/jobs/{failed_job}").get_data(as_text=True)
    assert "action-form" not in page
    assert retry(client, failed_job, token(client, "/ops/jobs/jobs")).status_code == 403
    assert job_row(clean_db, failed_job)["status"] == "failed"


def test_a_post_without_the_csrf_token_gets_400_and_changes_nothing(host, failed_job, clean_db):
    client = signed_in(host, "hannah")
    response = retry(client, failed_job, None)
    assert response.status_code == 400
    assert "CSRF" in response.get_data(as_text=True)
    assert job_row(clean_db, failed_job)["status"] == "failed"
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 0
    assert host.test_client().post("/api/ping").get_data(as_text=True) == "pong"


def test_static_files_and_htmx_fragments_resolve_under_the_prefix(host):
    client = signed_in(host, "viv")
    page = client.get("/ops/jobs/").get_data(as_text=True)
    assert 'href="/ops/jobs/static/console.css"' in page
    assert 'src="/ops/jobs/static/vendor/htmx-2.0.4.min.js"' in page
    assert 'hx-get="/ops/jobs/_overview/counts"' in page
    assert client.get("/ops/jobs/static/console.css").status_code == 200
    fragment = client.get("/ops/jobs/_overview/counts", headers={"HX-Request": "true"})
    assert fragment.status_code == 200
    assert "<html" not in fragment.get_data(as_text=True)


def test_the_hosts_pages_templates_errors_and_headers_stay_its_own(host):
    client = signed_in(host, "hannah")
    home = client.get("/")
    assert home.get_data(as_text=True) == "HOST BASE "
    assert "Content-Security-Policy" not in home.headers
    assert client.get("/note").get_data(as_text=True) == "api_token=host-visible"
    assert client.get("/nowhere").get_data(as_text=True) == "host 404"
    console_page = client.get("/ops/jobs/")
    assert "Content-Security-Policy" in console_page.headers
    assert "HOST BASE" not in console_page.get_data(as_text=True)
    missing = client.get("/ops/jobs/jobs/999999")
    assert missing.status_code == 404
    assert "There is nothing at this address" in missing.get_data(as_text=True)
    assert host.login_manager.login_view is None  # the host's Flask-Login, untouched
    assert not any(name.startswith("jobwarden") for name in host.jinja_env.globals)


def test_a_host_page_gets_none_of_the_consoles_context_and_runs_none_of_its_queries(
        tmp_path, empty_database):
    """Mounted over a database without the console's tables (not migrated yet), the host's
    pages still render: the navigation's counts belong to the console's pages alone."""
    app = make_host(tmp_path, empty_database, user_loader=host_identity, login_view="auth.login")
    statements: list[str] = []
    event.listen(app.extensions["jobwarden_db"].engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *rest: statements.append(statement))
    contexts: dict[str, set[str]] = {}

    def rendered(sender, template, context, **extra):
        contexts[template.name] = set(context)

    template_rendered.connect(rendered, app)
    try:
        client = signed_in(app, "hannah")
        assert client.get("/").get_data(as_text=True) == "HOST BASE "
        assert not statements
        assert not {"nav_badges", "console_settings", "config_poll"} & contexts["base.html"]
        # the console's own page does read (and, without its tables, says so)
        assert client.get("/ops/jobs/").status_code == 500
        assert statements
    finally:
        template_rendered.disconnect(rendered, app)
        app.extensions["jobwarden_db"].dispose()


def test_forms_come_back_to_their_page_behind_a_proxy_path(host, failed_job):
    """The host app served under /shop (SCRIPT_NAME, as a WSGI mount or a proxy's path
    prefix sets it), the console under its /ops/jobs prefix: the select-and-act bar's
    `next` and every redirect built from it keep both, and stay on this site."""
    client = host.test_client()
    shop = {"base_url": "http://localhost/shop"}
    stranger = client.get("/ops/jobs/jobs", query_string={"status": "failed"}, **shop)
    assert stranger.headers["Location"] == "/shop/login?next=/shop/ops/jobs/jobs?status%3Dfailed"
    assert client.get("/login?as=hannah", **shop).status_code == 200
    jobs = client.get("/ops/jobs/jobs?status=failed", **shop).get_data(as_text=True)
    assert '<input type="hidden" name="next" value="/shop/ops/jobs/jobs?status=failed">' in jobs
    group = client.get("/ops/jobs/failed/group?code=CRM_UNAVAILABLE", **shop)
    assert ('name="next" value="/shop/ops/jobs/failed/group?code=CRM_UNAVAILABLE"'
            in group.get_data(as_text=True))
    csrf = _CSRF.search(jobs).group(1)
    for back, expected in [("/shop/ops/jobs/jobs?status=failed",) * 2,
                           ("//evil.example/x", "/shop/ops/jobs/jobs"),
                           ("https://evil.example/x", "/shop/ops/jobs/jobs")]:
        review = client.post("/ops/jobs/bulk/select", **shop, data={
            "csrf_token": csrf, "action": "retry", "job_id": str(failed_job), "next": back})
        location = review.headers["Location"]
        assert review.status_code == 303 and location.startswith("/shop/ops/jobs/bulk/")
        page = client.get(location.removeprefix("/shop"), **shop)
        assert f'<a href="{expected}">« Back</a>' in page.get_data(as_text=True), back


def test_with_its_own_login_it_keeps_its_keys_apart_in_the_hosts_session(tmp_path, clean_db,
                                                                         users):
    app = make_host(tmp_path, clean_db)  # no user_loader: the console's own users
    try:
        client = app.test_client()
        assert client.get("/ops/jobs/failed").headers["Location"].startswith(
            "/ops/jobs/login?next=")
        client.get("/login?as=viv")  # signed in to the host as someone else
        signed = client.post("/ops/jobs/login", data={
            "username": "otto", "password": "correct horse battery",
            "csrf_token": token(client, "/ops/jobs/login")})
        assert signed.status_code == 303
        with client.session_transaction() as session:
            console_keys = {k for k in session if k.startswith("jobwarden_")}
            assert session["_user_id"] == "viv"  # the host's sign-in survived the console's
        assert console_keys
        page = client.get("/ops/jobs/").get_data(as_text=True)
        assert 'data-testid="current-user">otto<' in page
    finally:
        app.extensions["jobwarden_db"].dispose()


def test_a_host_filter_of_the_same_name_is_an_error_not_a_silent_swap(tmp_path, clean_db):
    app = Flask("host2")
    app.config["SECRET_KEY"] = "s"
    app.jinja_env.filters["age"] = lambda value: "host's age"
    with pytest.raises(RuntimeError, match="age"):
        Console(app, url_prefix="/jobs", database_url=clean_db)


def test_the_standalone_console_still_serves_at_the_root(client, login):
    assert login(client, "otto").status_code == 303
    page = client.get("/").get_data(as_text=True)
    assert 'href="/static/console.css"' in page
    assert client.get("/static/console.css").status_code == 200


def test_mounting_needs_a_secret_key(clean_db):
    with pytest.raises(RuntimeError, match="SECRET_KEY"):
        Console(Flask("nokey"), database_url=clean_db)



def test_a_host_can_restyle_the_console_by_overriding_its_templates(tmp_path, clean_db):
    (tmp_path / "templates" / "jobwarden").mkdir(parents=True)
    (tmp_path / "templates" / "jobwarden" / "error.html").write_text(
        "SHOP-STYLED {{ code }}: {{ message }}")
    app = make_host(tmp_path, clean_db, user_loader=host_identity)
    try:
        client = signed_in(app, "viv")
        missing = client.get("/ops/jobs/jobs/999999").get_data(as_text=True)
        page = client.get("/ops/jobs/jobs").get_data(as_text=True)
    finally:
        app.extensions["jobwarden_db"].dispose()
    assert missing == "SHOP-STYLED 404: There is nothing at this address."
    assert 'href="/ops/jobs/static/console.css"' in page  # the rest is the console's own


def test_users_are_the_hosts_to_manage_so_the_users_page_is_not_there(host, clean_db):
    admin = signed_in(host, "root")
    assert admin.get("/ops/jobs/users").status_code == 404
    assert 'href="/ops/jobs/users"' not in admin.get("/ops/jobs/").get_data(as_text=True)
    csrf = token(admin, "/ops/jobs/")
    added = admin.post("/ops/jobs/users", data={"csrf_token": csrf, "username": "backdoor",
                                                "password": "a long new password",
                                                "role": "admin"})
    assert added.status_code == 404
    assert admin.post("/ops/jobs/users/1/access", data={
        "csrf_token": csrf, "role": "admin", "access": "enabled"}).status_code == 404
    assert scalar(clean_db, "SELECT count(*) FROM console_users") == 0


def test_a_host_user_and_a_console_user_of_the_same_name_are_different_actors(
        host, failed_job, clean_db, users):
    from jobwarden.console import create_app
    from jobwarden.console.cli.accounts import user_add
    from tests.console_support import PASSWORD, csrf_token, login

    user_add("sop", "operator", PASSWORD, database_url=clean_db)
    standalone = create_app({"TESTING": True, "SECRET_KEY": "s", "DATABASE_URL": clean_db})
    try:
        console_sop = standalone.test_client()
        assert login(console_sop, "sop").status_code == 303
        made = console_sop.post("/bulk/select", data={
            "action": "retry", "job_id": str(failed_job),
            "csrf_token": csrf_token(console_sop, "/jobs")})
        review = made.headers["Location"].split("?")[0]
        assert console_sop.get(review).status_code == 200
    finally:
        standalone.extensions["jobwarden_db"].dispose()
    host_sop = signed_in(host, "sop")
    assert host_sop.get("/ops/jobs" + review).status_code == 404
    applied = host_sop.post("/ops/jobs" + review, data={
        "csrf_token": token(host_sop, "/ops/jobs/"), "reason": "not mine",
        "request_id": "r-sop"})
    assert "already used or has expired" in host_sop.get(
        applied.headers["Location"]).get_data(as_text=True)
    assert job_row(clean_db, failed_job)["status"] == "failed"
    assert scalar(clean_db, "SELECT array_agg(actor) FROM console_selections") == ["sop"]


@pytest.mark.parametrize("name", ["odd", "\u202egnp.exe", "x" * 500])
def test_a_host_user_with_an_unknown_role_or_an_unusable_name_gets_403(host, name):
    response = signed_in(host, name).get("/ops/jobs/")
    assert response.status_code == 403
    assert "Not allowed" in response.get_data(as_text=True)


@pytest.mark.parametrize("host_config", [
    {"WTF_CSRF_CHECK_DEFAULT": False}, {"WTF_CSRF_ENABLED": False},
    {"WTF_CSRF_METHODS": set()}, {"WTF_CSRF_METHODS": ["GET"]},
])
def test_the_hosts_csrf_settings_never_switch_off_the_consoles_check(
        tmp_path, clean_db, failed_job, host_config):
    app = make_host(tmp_path, clean_db, host_config, user_loader=host_identity,
                    login_view="auth.login")
    try:
        client = signed_in(app, "hannah")
        page = client.get(f"/ops/jobs/jobs/{failed_job}").get_data(as_text=True)
        assert 'name="csrf_token"' in page  # the console's forms still carry the token
        selected = client.post("/ops/jobs/bulk/select", data={
            "action": "retry", "job_id": str(failed_job)})
        assert selected.status_code == 400
        assert retry(client, failed_job, None).status_code == 400
        assert scalar(clean_db, "SELECT count(*) FROM console_selections") == 0
        assert job_row(clean_db, failed_job)["status"] == "failed"
        # and with the token, the console works under such a host
        assert retry(client, failed_job, token(client, "/ops/jobs/")).status_code == 303
    finally:
        app.extensions["jobwarden_db"].dispose()


def test_the_consoles_own_login_keeps_the_hosts_permanent_session(tmp_path, clean_db, users):
    app = make_host(tmp_path, clean_db)  # the console's own users, in the host's session
    try:
        client = app.test_client()
        client.get("/remember")
        signed = client.post("/ops/jobs/login", data={
            "username": "otto", "password": "correct horse battery",
            "csrf_token": token(client, "/ops/jobs/login")})
        assert signed.status_code == 303
        assert "Expires=" in signed.headers["Set-Cookie"]
        with client.session_transaction() as kept:
            assert kept.permanent
    finally:
        app.extensions["jobwarden_db"].dispose()


def test_the_consoles_own_login_issues_a_new_csrf_token_at_sign_in(tmp_path, clean_db, users,
                                                                   failed_job):
    app = make_host(tmp_path, clean_db)
    try:
        client = app.test_client()
        before = token(client, "/ops/jobs/login")  # known to whoever planted the session
        assert client.post("/ops/jobs/login", data={
            "username": "otto", "password": "correct horse battery",
            "csrf_token": before}).status_code == 303
        assert retry(client, failed_job, before).status_code == 400
        assert job_row(clean_db, failed_job)["status"] == "failed"
        assert retry(client, failed_job, token(client, "/ops/jobs/")).status_code == 303
    finally:
        app.extensions["jobwarden_db"].dispose()


def console_url_label(client) -> str:
    text = client.get("/ops/jobs/metrics").get_data(as_text=True)
    return re.search(r'^jobwarden_console_info\{console_url="([^"]*)"', text, re.M).group(1)


def test_the_alerts_links_start_with_the_mounted_consoles_external_url(tmp_path, clean_db):
    """Console(external_url=...) is where people open it; without it, the mount path
    alone (relative links: the host a request names is never trusted)."""
    told = make_host(tmp_path, clean_db, user_loader=host_identity, login_view="auth.login",
                     external_url="https://shop.example.com/ops/jobs")
    plain = make_host(tmp_path, clean_db, user_loader=host_identity, login_view="auth.login")
    try:
        assert console_url_label(signed_in(told, "viv")) == "https://shop.example.com/ops/jobs"
        assert console_url_label(signed_in(plain, "viv")) == "/ops/jobs"
        with pytest.raises(ValueError, match="absolute http"):
            Console(Flask("bad"), external_url="shop.example.com/ops/jobs", database_url=clean_db)
    finally:
        told.extensions["jobwarden_db"].dispose()
        plain.extensions["jobwarden_db"].dispose()


def top_bar(client, path: str = "/ops/jobs/failed") -> str:
    html = client.get(path).get_data(as_text=True)
    return re.search(r'<div class="who">(.*?)</div>', html, re.S).group(1)


def test_the_mounted_console_links_back_to_the_host_and_signs_out_through_it(tmp_path,
                                                                            clean_db):
    app = make_host(tmp_path, clean_db, user_loader=host_identity, login_view="auth.login",
                    home_view="home", home_label="Shop admin", logout_view="auth.logout")
    try:
        client = signed_in(app, "viv")
        bar = top_bar(client)
        assert re.search(r'<a class="host-home" href="/" data-testid="host-home">« Shop admin</a>',
                         bar), bar
        form = re.search(r'<form method="post" action="/logout" class="inline">\s*'
                         r'<input type="hidden" name="csrf_token" value="([^"]+)">', bar)
        assert form, bar
        # The console's token is the session's, so the host's own CSRF check takes it.
        assert client.post("/logout", data={"csrf_token": form.group(1)}).status_code == 200
        assert client.get("/ops/jobs/failed").status_code == 302  # signed out: to the login
    finally:
        app.extensions["jobwarden_db"].dispose()


def test_a_hosts_get_sign_out_is_a_link_and_without_a_home_view_home_is_the_site_root(
        tmp_path, clean_db):
    app = make_host(tmp_path, clean_db, user_loader=host_identity, login_view="auth.login",
                    logout_view="auth.bye")
    plain = make_host(tmp_path, clean_db, user_loader=host_identity, login_view="auth.login")
    try:
        bar = top_bar(signed_in(app, "viv"))
        assert '<a class="host-home" href="/" data-testid="host-home">« Back to the app</a>' in bar
        assert '<a class="host-logout" href="/bye" data-testid="sign-out">Sign out</a>' in bar
        # A host that names no sign-out gets none it cannot honour (its own is elsewhere).
        assert 'data-testid="sign-out"' not in top_bar(signed_in(plain, "viv"))
    finally:
        app.extensions["jobwarden_db"].dispose()
        plain.extensions["jobwarden_db"].dispose()


def test_the_standalone_console_has_its_own_sign_out_and_no_host_to_go_back_to(viewer):
    bar = top_bar(viewer, "/failed")
    assert 'data-testid="host-home"' not in bar and 'data-testid="sign-out"' in bar
