"""Chart rendering: values.yaml and Chart.yaml from Jinja2 templates, and the chart directory."""
