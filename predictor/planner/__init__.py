"""Pure planning: forecasts and demand predictions in, desired queue quotas and XDP profiles out."""
