"""The navigation renders from jobwarden.console.views.AREAS: each area's link goes to an endpoint
that exists, in AREAS' order, and only to users whose role reaches the area's."""

from __future__ import annotations

import re

import pytest

from jobwarden.console.views import AREAS
from jobwarden.console.web.identity import ROLE_RANK

LINK = re.compile(r'<a href="([^"]+)"[^>]*>([^<]+)')


def nav_links(client) -> list[tuple[str, str]]:
    html = client.get("/jobs").get_data(as_text=True)
    nav = html.split('<nav id="main-nav" aria-label="Main">', 1)[1].split("</nav>", 1)[0]
    return [(href, label.strip()) for href, label in LINK.findall(nav)]


def expected_links(app, role: str) -> list[tuple[str, str]]:
    with app.test_request_context():
        from flask import url_for

        return [(url_for(a.endpoint), a.label) for a in AREAS
                if a.endpoint and ROLE_RANK[role] >= ROLE_RANK[a.role]]


def test_every_area_in_the_navigation_names_an_endpoint_the_console_serves(app):
    endpoints = {rule.endpoint for rule in app.url_map.iter_rules()}
    listed = [a for a in AREAS if a.endpoint]
    assert len(listed) >= 10
    assert [a.endpoint for a in listed if a.endpoint not in endpoints] == []
    assert all(a.role in ROLE_RANK for a in AREAS)


@pytest.mark.parametrize("name,role", [("vera", "viewer"), ("otto", "operator"),
                                       ("ada", "admin")])
def test_each_role_sees_exactly_the_areas_its_role_reaches(app, client, login, name, role):
    login(client, name)
    assert nav_links(client) == expected_links(app, role)


def test_a_viewer_sees_no_link_to_users(viewer):
    assert "Users" not in [label for _href, label in nav_links(viewer)]


def test_an_admin_sees_the_users_link_and_the_badges_keep_their_names(app, client, login,
                                                                     make_job):
    make_job("failed", error_code="BOOM")
    login(client, "ada")
    assert ("/users", "Users") in nav_links(client)
    html = client.get("/jobs").get_data(as_text=True)
    assert 'data-testid="nav-badge-failed"' in html
