"""The Engram CDK app: stage config, stacks, constructs and Docker-free Lambda bundling."""
