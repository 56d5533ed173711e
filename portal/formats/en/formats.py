"""English: 26 Nov 2026, 14:05 (day month year, 24-hour clock, as people read it everywhere)."""

DATE_FORMAT = "j M Y"
TIME_FORMAT = "H:i"
DATETIME_FORMAT = "j M Y, H:i"
YEAR_MONTH_FORMAT = "M Y"
MONTH_DAY_FORMAT = "j M"
SHORT_DATE_FORMAT = "j M Y"
SHORT_DATETIME_FORMAT = "j M Y, H:i"
FIRST_DAY_OF_WEEK = 1  # Monday
DECIMAL_SEPARATOR = "."
THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
