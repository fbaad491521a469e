"""One policy for console user names and passwords, used by the form and the CLI."""

import pytest

from jobwarden.console.core.account_policy import MIN_PASSWORD, check_password, normalize_username


@pytest.mark.parametrize("given, stored", [
    ("ada", "ada"),
    ("  Ada ", "ada"),
    ("ＡＤＡ", "ada"),  # fullwidth letters fold to ASCII (NFKC)
    ("Straße", "strasse"),  # case folding, not lower()
    ("josé.garcía", "josé.garcía"),
    ("ops-team_2", "ops-team_2"),
    ("ολγα", "ολγα"),
])
def test_user_names_are_normalized(given, stored):
    assert normalize_username(given) == stored


@pytest.mark.parametrize("name", [
    "", "   ", "a" * 101,
    "ada\u200b",  # zero-width space
    "\u202eada",  # right-to-left override
    "ad\u00ada",  # soft hyphen
    "ad\na", "ada\x00", "a da",
    "\u0430da",  # Cyrillic а + Latin "da": a look-alike of "ada"
])
def test_invisible_bidi_control_and_mixed_script_names_are_refused(name):
    with pytest.raises(ValueError):
        normalize_username(name)


@pytest.mark.parametrize("password", [
    "", " " * 20, "\t\n" * 8, "short1!", "x" * (MIN_PASSWORD - 1),
    "aaaaaaaaaaaaaaaa", "abababababababab", "password1234", "1234567890", "qwertyuiop",
    "adaadaadaada", "ada-ada-ada!",
])
def test_weak_passwords_are_refused(password):
    with pytest.raises(ValueError):
        check_password(password, "ada")


@pytest.mark.parametrize("password", ["correct horse battery", "Tr0ub4dor&3x", "jobwarden-demo"])
def test_reasonable_passwords_pass(password):
    check_password(password, "ada")


@pytest.mark.parametrize("name", ["host:sop", "ｈｏｓｔ：sop", "a:b"])
def test_a_console_user_name_cannot_pass_for_a_host_users_actor_name(name):
    with pytest.raises(ValueError, match="colon"):
        normalize_username(name)
