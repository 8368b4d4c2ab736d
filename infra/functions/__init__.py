"""Lambda functions owned by the infrastructure (deploy-time steps), not the API."""
