"""A database error in the console is logged as its class, SQLSTATE and statement name,
never with the statement's bound values (a password hash, a reason, a key)."""

from __future__ import annotations

import logging

import psycopg


def test_a_failing_statement_is_logged_without_its_parameters(client, login, post_form,
                                                              clean_db, caplog):
    with psycopg.connect(clean_db, autocommit=True) as conn:
        conn.execute("""
            CREATE OR REPLACE FUNCTION refuse_new_users() RETURNS trigger AS $$
            BEGIN RAISE EXCEPTION 'user table is read-only' USING DETAIL = NEW.password_hash;
            END $$ LANGUAGE plpgsql;
            CREATE TRIGGER refuse_new_users BEFORE INSERT ON console_users
                FOR EACH ROW EXECUTE FUNCTION refuse_new_users();""")
    try:
        login(client, "ada")
        with caplog.at_level(logging.INFO):
            response = post_form(client, "/users", {"username": "nina", "role": "viewer",
                                                    "password": "correct horse staple"},
                                 token_from="/users")
        assert response.status_code == 500
        assert "Traceback" not in response.get_data(as_text=True)
        logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
        for r in caplog.records:  # what a handler would format, tracebacks included
            if r.exc_info:
                logged += logging.Formatter().formatException(r.exc_info)
        assert "console_user_upsert" in logged and "RaiseException" in logged
        assert "$argon2" not in logged and "nina" not in logged
    finally:
        with psycopg.connect(clean_db, autocommit=True) as conn:
            conn.execute("DROP TRIGGER refuse_new_users ON console_users")
