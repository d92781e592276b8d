"""Admin site of the notifications: the targets (editable) and the notices sent (read only)."""

from django import forms
from django.contrib import admin

from webapp.inbox.kinds import NoticeKind
from webapp.inbox.models import NoticeSent, NotificationTarget, webhook_url_validator


class NotificationTargetForm(forms.ModelForm):
    webhook_url = forms.URLField(required=False, max_length=500, assume_scheme="https",
                                 validators=[webhook_url_validator],
                                 help_text=NotificationTarget._meta.get_field("webhook_url").help_text)
    kinds = forms.MultipleChoiceField(choices=NoticeKind.choices, required=False,
                                      widget=forms.CheckboxSelectMultiple, help_text="None ticked: every kind.")

    class Meta:
        model = NotificationTarget
        fields = ["name", "job", "webhook_url", "emails", "kinds", "enabled"]


@admin.register(NotificationTarget)
class NotificationTargetAdmin(admin.ModelAdmin):
    form = NotificationTargetForm
    list_display = ["name", "job", "webhook_url", "emails", "enabled"]
    list_filter = ["enabled"]
    search_fields = ["name", "job__name", "webhook_url", "emails"]


@admin.register(NoticeSent)
class NoticeSentAdmin(admin.ModelAdmin):
    list_display = ["job", "kind", "last_sent_at", "count"]
    list_filter = ["kind"]
    readonly_fields = ["key", "job", "kind", "last_sent_at", "count"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
