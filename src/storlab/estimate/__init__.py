"""storlab.estimate"""
