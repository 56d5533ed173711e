"""The portal's one date, time and number format per language (settings.FORMAT_MODULE_PATH).

Templates use the names, never a pattern: `{{ when|date:"DATETIME_FORMAT" }}`, `{{ day|date }}`
(DATE_FORMAT), `{{ month|date:"YEAR_MONTH_FORMAT" }}`, `{{ when|time }}` (TIME_FORMAT). Dates are
shown in the person's time zone, named once in the page header. CSV files and the API keep
ISO 8601 in UTC.
"""
