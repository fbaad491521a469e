# Flask-WTF ships no types (no py.typed, no stub package): the part the console uses,
# typed against types-WTForms, so its forms are checked rather than subclassing Any.
from typing import Any

from wtforms import Form
from wtforms.meta import DefaultMeta

class FlaskForm(Form):
    class Meta(DefaultMeta):
        csrf: bool
        csrf_field_name: str

    def __init__(self, formdata: Any = ..., **kwargs: Any) -> None: ...
    def is_submitted(self) -> bool: ...
    def validate_on_submit(self, extra_validators: Any = None) -> bool: ...
