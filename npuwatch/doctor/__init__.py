"""npuwatch doctor: small independent checks that find what is wrong with an Ascend environment."""
