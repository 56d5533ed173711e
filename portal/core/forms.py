from django import forms


class AuditFilterForm(forms.Form):
    tenant = forms.SlugField(required=False)
    actor = forms.CharField(required=False, max_length=150)
    action = forms.CharField(required=False, max_length=64, help_text="e.g. quota or tenant.create")
    target_type = forms.CharField(required=False, max_length=64)
    target_id = forms.CharField(required=False, max_length=64)
    since = forms.DateTimeField(required=False, help_text="ISO 8601, UTC")
    until = forms.DateTimeField(required=False)
